"""The grader of ``tutorials/exercises``: ``python -m mlp_ref check FILE_OR_DIR... [--gradebook CSV]``.

Each submission runs in a child process of its own (``runner``, ``child``), under a wall-clock
limit per function and CPU-time and memory limits, in a temporary folder; its answers come back
as plain arrays (``wire``) and are compared, in this process, with the reference answers
(``checks``), which the child never computes (it sees a reference answer only where one of its
functions is graded again with the grader's answer standing in for a failing callee, in a fresh
child that may write no file). Each function gets one line: PASS, "not implemented yet", or what
is wrong (the stage or the rule, the worst entry, yours and ours, and a hint; a usual mistake by
name; for an exception, the stage it was computing and a hint from the shapes, ``hints``; a
function that fails only because a function it calls fails says so). Whatever the file does
(exit, hang, crash, print, patch the package) is reported in one line, and the next file is
graded. Each exercise's "predict, then run" constants are checked against runs made here.

Where it can, the child runs in a sandbox (``sandbox``: bubblewrap on Linux, else a uid of its
own when the grader is root), which holds neither the reference answers, nor the solutions, nor
the other submissions, and which nothing it starts outlives; the first line on standard error
names the isolation used. Where neither starts, it says so: grade such files in a container.

Exit status: 0 when every function of every file passes, 1 when one fails or is not
implemented yet, 2 when a file cannot be graded, 130 when stopped by Ctrl-C.
"""
from __future__ import annotations

import ast
import csv
import io
import os
import reprlib
import stat
import sys
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .answers import ALLOWED, EXERCISES, PREDICTIONS, REFERENCES, TOL, Verdict, Wrong, compare  # noqa: F401
from . import runner, sandbox
from .runner import MEMORY_LIMIT, StudentProblem, Submission

#: Seconds of the child's time each function's check may take (each takes well under one with
#: a right answer): past it, the child is stopped and the function reported as still running.
TIME_LIMIT = 60.0

#: The largest file graded (bytes): an exercise is a few kB.
MAX_SOURCE = 2 ** 20

SOLUTIONS = Path(__file__).resolve().parents[3] / "tutorials" / "exercises" / "solutions"


class FileProblem(Exception):
    """The student's file cannot be graded: one line says why."""


@dataclass
class Result:
    path: str
    exercise: str = ""
    verdicts: list = field(default_factory=list)         # one per function
    predictions: list = field(default_factory=list)      # one per "predict, then run" constant
    problem: str = ""

    @property
    def passed(self):
        """Functions that pass and predictions that are right."""
        return sum(v.status == "PASS" for v in self.verdicts + self.predictions)

    @property
    def total(self):
        return len(self.verdicts) + len(self.predictions)

    @property
    def status(self):
        if self.problem:
            return 2
        return 0 if self.passed == self.total else 1


def read_source(path):
    """The text of a regular file (any encoding Python reads: a BOM, a coding line), or
    FileProblem. A FIFO or a device is refused before it is opened: opening it could hang."""
    try:
        info = os.stat(path)
    except OSError as exc:
        raise FileProblem(f"cannot read it ({exc.strerror or exc})") from None
    if not stat.S_ISREG(info.st_mode):
        kind = "a folder" if stat.S_ISDIR(info.st_mode) else "a FIFO" if stat.S_ISFIFO(
            info.st_mode) else "not a regular file"
        raise FileProblem(f"not a Python file: {kind}")
    if info.st_size > MAX_SOURCE:
        raise FileProblem(f"{info.st_size} bytes: larger than any exercise ({MAX_SOURCE} at most)")
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_SOURCE + 1)
    except OSError as exc:
        raise FileProblem(f"cannot read it ({exc.strerror or exc})") from None
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError as exc:                    # bytes that are not UTF-8, or a bad coding line
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as bad:
            raise FileProblem(f"not UTF-8 text (byte {bad.start}): save it as UTF-8, as Python "
                              f"files are") from None
        raise FileProblem(f"its coding line names no encoding Python knows ({exc.msg})") from None
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as exc:
        name = "UTF-8" if encoding.startswith("utf-8") else encoding
        raise FileProblem(f"not {name} text (byte {exc.start}): save it as UTF-8, as Python "
                          f"files are") from None
    return text[1:] if text.startswith("\ufeff") else text


def exercise_of(source, path, syntax_first=False):
    """The exercise a file answers: its ``EXERCISE = "..."`` constant (read from the code, not
    run), or its name (01_layer_backward.py, 01_layer_backward_alice.py). ``syntax_first``: a
    file that does not parse says so (the child would say it too, of a file it can grade)."""
    name = None
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        if syntax_first:
            raise FileProblem(f"syntax error at line {exc.lineno}: {exc.msg}") from None
        tree = None
    except (ValueError, RecursionError, MemoryError):
        tree = None
    for node in getattr(tree, "body", []):
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "EXERCISE"
                                                 for t in node.targets)):
            name = node.value.value if isinstance(node.value, ast.Constant) else ast.unparse(node.value)
    if isinstance(name, str) and name in EXERCISES:
        return name
    for known in EXERCISES:
        if Path(path).stem.startswith(known):
            return known
    raise FileProblem(f"not one of the exercises: expected EXERCISE = one of {list(EXERCISES)}, "
                      f"got {reprlib.repr(name)}")


def _keep_out(path):
    """The solutions folder, unless the graded file is in it (the project's own tests)."""
    if not SOLUTIONS.is_dir():
        return None
    inside = Path(path).resolve().parent == SOLUTIONS
    return None if inside else str(SOLUTIONS)


def grade_file(path, time_limit=TIME_LIMIT, memory_limit=MEMORY_LIMIT, isolate=True):
    """Grade one file: a Result with a Verdict per function and per prediction, or a problem.

    ``isolate=False`` runs the file in this process (the project's tests of the feedback; no
    limits, no tripwires): never for a file you did not write.
    """
    result = Result(str(path))
    try:
        source = read_source(path)
        result.exercise = exercise_of(source, path, syntax_first=True)
    except FileProblem as problem:
        result.problem = str(problem)
        return result
    checks = EXERCISES[result.exercise][1]
    predictions = PREDICTIONS.get(result.exercise, {})
    submission = Submission(path, source, result.exercise, list(checks), ALLOWED[result.exercise],
                            list(predictions), time_limit, memory_limit, _keep_out(path), isolate)
    try:
        try:
            defined, answers = submission.start()
        except StudentProblem as problem:
            result.problem = problem.what
            return result
        calls = {}
        for function, check in checks.items():
            if function not in defined:
                result.verdicts.append(Verdict(function, "FAIL", f"missing: define {function}(...)"))
                continue
            try:
                submission.begin(function)        # a child stopped before is started again
            except StudentProblem as problem:
                result.verdicts.append(Verdict(function, "ERROR", f"started again, the file "
                                               f"failed: {problem.what}"))
                continue
            result.verdicts.append(_verdict(function, check, submission))
            calls[function] = submission.calls
        for name, check in predictions.items():
            result.predictions.append(_prediction(name, check, answers.get(name)))
        _blame_callees(result.verdicts, calls, checks, submission)
    finally:
        submission.stop()
    return result


def _verdict(function, check, submission):
    try:
        with np.errstate(all="ignore"):           # a student's overflow is a FAIL, not noise
            check(submission.function(function))
    except StudentProblem as problem:
        return Verdict(function, problem.status, problem.what, problem.hint)
    except Wrong as wrong:
        return Verdict(function, "FAIL", wrong.what, wrong.hint)
    except Exception as exc:                      # noqa: BLE001 - an answer the check cannot read
        return Verdict(function, "FAIL", f"the answer is not what the exercise asks for (the "
                                         f"check met a {type(exc).__name__} reading it)",
                       "compare your return value with the docstring's Returns")
    return Verdict(function, "PASS")


def _prediction(name, check, value):
    if value is None:
        return Verdict(name, "TODO", "not answered yet")
    try:
        check(value)
    except Wrong as wrong:
        return Verdict(name, "FAIL", wrong.what, wrong.hint)
    return Verdict(name, "PASS")


def _blame_callees(verdicts, calls, checks, submission):
    """A function that fails while a function it calls fails says so. It is graded again with
    the grader's own answer standing in for each failing callee: if it then passes, it fails
    only because of them (fix them first); if not, it has a mistake of its own too."""
    status = {v.function: v.status for v in verdicts}
    for v in verdicts:
        failing = [c for c in sorted(calls.get(v.function, ())) if status.get(c, "PASS") != "PASS"]
        if v.status == "PASS" or not failing:
            continue
        names = ", ".join(failing)
        one = len(failing) == 1
        if all(c in REFERENCES for c in failing) and v.status != "TODO":
            try:
                submission.begin(v.function, {c: REFERENCES[c] for c in failing})
                again = _verdict(v.function, checks[v.function], submission)
            except StudentProblem as problem:
                again = Verdict(v.function, problem.status, problem.what)
            finally:
                submission.stand_ins = {}
            if again.status == "PASS":        # right: only its callees are wrong
                v.status, v.hint = "PASS", ""
                v.what = (f"passes with our {names} ({'yours fails' if one else 'yours fail'}: "
                          f"fix {'it' if one else 'them'})")
                continue
            v.what = (f"{v.what}; it calls {names}, which {'fails' if one else 'fail'}, but fails "
                      f"with {'a right one' if one else 'right ones'} too: {again.what}")
            v.hint = again.hint or v.hint
            continue
        v.what = f"{v.what}; it calls {names}, which {'fails' if one else 'fail'}: fix that first"


def report(result):
    """A Result as text: one line per function (and a hint line under a failure)."""
    if result.problem:
        return f"check: {result.path}: {result.problem}"
    lines = [f"Exercise {result.exercise}: {EXERCISES[result.exercise][0]}   ({result.path})"]
    lines += _lines(result.verdicts)
    functions = sum(v.status == "PASS" for v in result.verdicts)
    total = len(result.verdicts)
    tail = [f"{functions} of {total} {'functions' if total > 1 else 'function'} pass."]
    if result.predictions:
        lines.append("  predict, then run:")
        lines += _lines(result.predictions, indent="    ")
        right = sum(v.status == "PASS" for v in result.predictions)
        n = len(result.predictions)
        tail.append(f"{right} of {n} {'predictions' if n > 1 else 'prediction'} right.")
    lines.append(" ".join(tail) + (" All done." if result.status == 0 else ""))
    return "\n".join(lines)


def _lines(verdicts, indent="  "):
    width = max(len(v.function) for v in verdicts) + 2
    lines = []
    for v in verdicts:
        text = {"PASS": f"PASS  {v.what}" if v.what else "PASS",
                "TODO": v.what or "not implemented yet"}.get(v.status, f"{v.status:<6}{v.what}")
        lines.append(f"{indent}{v.function:{width}}{text}")
        if v.hint:
            lines.append(f"{indent}{'':{width}}hint: {v.hint}")
    return lines


def summary(result):
    """One line: the file, its exercise, how many pass (or its problem)."""
    if result.problem:
        return f"{result.path}: cannot be graded: {result.problem}"
    return f"{result.path}: {result.exercise}: {result.passed} of {result.total} pass"


def submissions(paths):
    """The files to grade: each FILE given, and in each DIR every ``.py`` file that names an
    exercise (by its EXERCISE constant or its name); the other files of a DIR are helpers."""
    files = []
    for p in map(Path, paths):
        if p.is_dir():
            for f in sorted(p.rglob("*.py")):
                if "__pycache__" in f.parts:
                    continue
                try:
                    exercise_of(read_source(f), f)
                except FileProblem:
                    if f.stem.startswith("_") or not _names_exercise(f):
                        continue                  # a helper module beside the submissions
                files.append(f)
        else:
            files.append(p)
    return files


def _names_exercise(f):
    """Whether a file assigns EXERCISE (read as text: a file that cannot be read is graded,
    to say so)."""
    try:
        return "EXERCISE" in read_source(f)
    except FileProblem:
        return True


def graded(exercise):
    """The functions and the "predict, then run" constants of ``exercise``: what it is graded on."""
    return list(EXERCISES[exercise][1]) + list(PREDICTIONS.get(exercise, {}))


def write_gradebook(results, path):
    """One CSV row per submission: file, exercise, passed, total, one column per function of
    the exercises present (PASS/FAIL/TODO/ERROR), and the note of a file that cannot be graded.
    Such a file of a known exercise counts 0 of that exercise's total, ERROR in each column."""
    columns = []
    for exercise in EXERCISES:
        if any(r.exercise == exercise for r in results):
            columns += [c for c in graded(exercise) if c not in columns]
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["file", "exercise", "passed", "total", *columns, "note"])
        for r in results:
            status = {v.function: v.status for v in r.verdicts + r.predictions}
            total = r.total
            if r.problem and r.exercise in EXERCISES:
                status, total = dict.fromkeys(graded(r.exercise), "ERROR"), len(graded(r.exercise))
            writer.writerow([r.path, r.exercise, r.passed, total,
                             *[status.get(c, "") for c in columns], r.problem])


def main(paths, out=None, gradebook=None, time_limit=TIME_LIMIT, isolate=True, progress=None):
    """Grade ``paths`` (files or folders); print a report per file (one file) or a summary line
    per file (several, or with a gradebook); write the gradebook; return the exit status."""
    out = sys.stdout if out is None else out
    progress = sys.stderr if progress is None else progress
    paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    files = submissions(paths)
    results = []
    if isolate and files:
        print(f"check: each file runs in a child process, isolated by {sandbox.choose()}",
              file=progress, flush=True)
    for shadow in runner.shadows(paths):
        print(f"check: {shadow}: `python -m mlp_ref` started in its folder would run it in place "
              f"of the grader; start it elsewhere, or run mlp-ref or python -P -m mlp_ref",
              file=progress)
    try:
        for i, path in enumerate(files, 1):
            if len(files) > 1:
                print(f"check: [{i}/{len(files)}] {path}", file=progress, flush=True)
            results.append(grade_file(path, time_limit, isolate=isolate))
            if len(files) > 1 or gradebook:
                print(summary(results[-1]), file=out, flush=True)
            else:
                print(report(results[-1]), file=out)
    except KeyboardInterrupt:
        print(f"check: stopped (Ctrl-C) after {len(results)} of {len(files)} files", file=out)
        return 130
    if gradebook:
        write_gradebook(results, gradebook)
        print(f"check: gradebook of {len(results)} files written to {gradebook}", file=progress)
    if not results:
        print(f"check: no exercise file in {', '.join(map(str, paths))}", file=out)
        return 2
    return max(r.status for r in results)
