"""The grader of ``tutorials/exercises``: ``python -m mlp_ref check FILE_OR_DIR... [--gradebook CSV]
[--feedback DIR] [--roster CSV] [--lms SYSTEM CSV]`` (the class's files: ``gradebook``).

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
implemented yet or a roster student has no file, 2 when a file cannot be graded (its row scores 0
and says why), 130 when stopped by Ctrl-C.
"""
from __future__ import annotations

import ast
import io
import os
import reprlib
import stat
import sys
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...files import atomic
from . import gradebook as gradebook_rows
from .answers import ALLOWED, EXERCISES, PREDICTIONS, REFERENCES, TOL, Verdict, Wrong, compare  # noqa: F401
from . import runner, sandbox
from .gradebook import graded, shown  # noqa: F401
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
    helper: str = ""                                     # why a file of a folder is not graded

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
    except SyntaxError:
        if syntax_first:
            _syntax(source)
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
    if not source.strip():
        raise FileProblem("the file is empty: no exercise to grade")
    first, *_, last = EXERCISES
    raise FileProblem(f"not one of the exercises: expected EXERCISE = one of {first!r} ... {last!r} "
                      f"(or a file name that starts with one), got {reprlib.repr(name)}")


def _syntax(source):
    """FileProblem for source that does not parse: its line (when Python gives one) and why."""
    try:
        ast.parse(source)
    except SyntaxError as exc:
        where = f" at line {exc.lineno}" if exc.lineno else ""
        raise FileProblem(f"syntax error{where}: {exc.msg}") from None
    except (ValueError, RecursionError, MemoryError):
        pass                                      # the child says what it makes of it


def _utf8_name(path):
    """FileProblem for a file whose name is not UTF-8 (the gradebook, the feedback file and the
    report could not name it faithfully)."""
    raw = os.fsencode(os.fspath(path))
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileProblem(f"its name is not UTF-8 (byte {exc.start} of the path): rename it") from None


def _keep_out(path):
    """The solutions folder, unless the graded file is in it (the project's own tests)."""
    if not SOLUTIONS.is_dir():
        return None
    inside = Path(path).resolve().parent == SOLUTIONS
    return None if inside else str(SOLUTIONS)


def grade_file(path, time_limit=TIME_LIMIT, memory_limit=MEMORY_LIMIT, isolate=True, exercise=None, others=None):
    """Grade one file: a Result with a Verdict per function and per prediction, or a problem.

    ``others``: the other submissions its child must not reach (``other_submissions``, found
    anew when not given: a class folder's ``main`` passes what its ``collect`` found once).

    ``exercise``: grade it as that exercise (Gradescope's assignment), whatever its name; a file
    whose EXERCISE names another is refused. ``isolate=False`` runs the file in this process
    (the project's tests of the feedback; no limits, no tripwires): never for a file you did not
    write.
    """
    result = Result(str(path), exercise or "")
    try:
        _utf8_name(path)
        source = read_source(path)
        if exercise is None:
            result.exercise = exercise_of(source, path, syntax_first=True)
        else:
            _syntax(source)
            named = recognised_exercise(source, path)
            if named not in (None, exercise):
                raise FileProblem(f"this assignment is exercise {exercise}; the file answers {named}")
    except FileProblem as problem:
        result.problem = str(problem)
        return result
    checks = EXERCISES[result.exercise][1]
    predictions = PREDICTIONS.get(result.exercise, {})
    submission = Submission(path, source, result.exercise, list(checks), ALLOWED[result.exercise],
                            list(predictions), time_limit, memory_limit, _keep_out(path), isolate,
                            (other_submissions(path) if others is None else others) if isolate else ())
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
            fn = submission.function(function)
            fn.memory_limited = submission.isolate    # a check of what fits in the child's memory
            check(fn)
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
        return f"check: {shown(result.path)}: {result.problem}"
    lines = [f"Exercise {result.exercise}: {EXERCISES[result.exercise][0]}   ({shown(result.path)})"]
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
        return f"{shown(result.path)}: cannot be graded: {result.problem}"
    return f"{shown(result.path)}: {result.exercise}: {result.passed} of {result.total} pass"


def submissions(paths):
    """The files to grade: each FILE given, and in each DIR every ``.py`` file but its helpers
    (``collect``)."""
    return [path for path, _, helper in collect(paths) if not helper]


def collect(paths):
    """Every file named, and every ``.py`` file of each DIR (below it, ``__pycache__`` aside), as
    (path, its path below the DIR named, helper): ``helper`` is "" for a submission, else why the
    file is a helper module and not graded. A file of a DIR is a helper when no exercise is
    recognised in it (its EXERCISE constant or its name) and either its name starts with ``_`` or
    another file of the DIR imports it by its module name (``from my_helpers import sigmoid``);
    any other file is graded, and a file with no exercise scores 0 with the reason."""
    found = []
    for p in map(Path, paths):
        if not p.is_dir():
            found.append((p, p.name, ""))
            continue
        files = [f for f in sorted(p.rglob("*.py")) if "__pycache__" not in f.relative_to(p).parts]
        sources = {}
        for f in files:
            try:
                sources[f] = read_source(f)
            except FileProblem:
                sources[f] = None
        imported = {}
        for f, source in sources.items():
            for module in _imports(source):
                imported.setdefault(module, f)
        for f in files:
            relative = str(f.relative_to(p))
            helper = ""
            if sources[f] is not None and recognised_exercise(sources[f], f) is None:
                if f.stem.startswith("_"):
                    helper = "a helper module (its name starts with _): not graded"
                elif f.stem in imported and imported[f.stem] != f:
                    helper = (f"a helper module ({shown(imported[f.stem].name)} imports it): "
                              f"not graded")
            found.append((f, relative, helper))
    return found


def other_submissions(path):
    """The other submissions in ``path``'s folder and below it, told from helper modules by
    ``collect``'s rule, the gradebook's: kept out of its child's reach."""
    me = Path(path).resolve()
    try:
        found = [f.resolve() for f, _, helper in collect([me.parent]) if not helper]
    except OSError:
        return []
    return sorted(str(f) for f in found if f != me)


def _imports(source):
    """The module names a file's code imports (``import a.b`` and ``from a import b`` give a and b)."""
    try:
        tree = ast.parse(source or "")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.module:
                names.add(node.module.split(".")[0])
            names.update(a.name for a in node.names)
    return names


def recognised_exercise(source, path):
    """The exercise ``exercise_of`` recognises in a file, or None."""
    try:
        return exercise_of(source, path)
    except FileProblem:
        return None


def main(paths, out=None, gradebook=None, time_limit=TIME_LIMIT, isolate=True, progress=None,
         feedback=None, roster=None, lms=(), points=None):
    """Grade ``paths`` (files or folders); print a report per file (one file) or a summary line
    per file (several, or with a gradebook); write the gradebook, the feedback files and the LMS
    exports; return the exit status.

    ``feedback``: a folder, one file per submission (what the report of that file alone says);
    ``roster``: a CSV path or the students of ``gradebook_rows.read_roster``; ``lms``: pairs
    (system, CSV path); ``points``: name -> points overriding ``answers.points``. Every target is
    checked before any file is graded (``check_targets``), and written whole or not at all.
    """
    out = sys.stdout if out is None else out
    progress = sys.stderr if progress is None else progress
    paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    students = gradebook_rows.read_roster(roster) if isinstance(roster, (str, os.PathLike)) else roster
    check_targets(gradebook, feedback, lms, students)
    found, dirs = collect(paths), [Path(p).resolve() for p in paths if Path(p).is_dir()]
    graded_files = [(f, rel) for f, rel, helper in found if not helper]
    names = dict(zip([f for f, _ in graded_files],
                     gradebook_rows.feedback_names([rel for _, rel in graded_files])))
    results, book = [], []
    several = len(found) > 1 or gradebook or feedback or students is not None
    if isolate and graded_files:
        print(f"check: each file runs in a child process, isolated by {sandbox.choose()}",
              file=progress, flush=True)
    for shadow in runner.shadows(paths):
        print(f"check: {shadow}: `python -m mlp_ref` started in its folder would run it in place "
              f"of the grader; start it elsewhere, or run mlp-ref or python -P -m mlp_ref",
              file=progress)
    try:
        for path, relative, helper in found:
            if helper:
                results.append((Result(str(path), helper=helper), relative))
                print(f"{shown(path)}: {helper}", file=out, flush=True)
                continue
            if len(graded_files) > 1:
                i = len([r for r, _ in results if not r.helper]) + 1
                print(f"check: [{i}/{len(graded_files)}] {shown(path)}", file=progress, flush=True)
            folder, others = Path(path).resolve().parent, None     # a file named alone: found anew
            if any(d == folder or d in folder.parents for d in dirs):  # its folder was collected whole
                others = sorted(str(f.resolve()) for f, _ in graded_files
                                if f != path and folder in f.resolve().parents)
            result = grade_file(path, time_limit, isolate=isolate, others=others)
            results.append((result, relative))
            if feedback:
                gradebook_rows.write_feedback(feedback, names[path], report(result))
            print(summary(result) if several else report(result), file=out, flush=True)
    except KeyboardInterrupt:
        done = len([r for r, _ in results if not r.helper])
        print(f"check: stopped (Ctrl-C) after {done} of {len(graded_files)} files", file=out)
        return 130
    book = gradebook_rows.rows(results, students, points)
    missing = [r for r in book if r.note.startswith("missing")]
    for r in missing:
        print(f"{r.student.name}: {r.note}", file=out)
    if gradebook:
        gradebook_rows.write_gradebook(book, gradebook, students is not None)
        print(f"check: gradebook of {len(book)} rows ({len(graded_files)} files graded, {len(missing)} "
              f"student{'' if len(missing) == 1 else 's'} missing) written to {gradebook}", file=progress)
    for system, target in lms:
        gradebook_rows.write_lms(system, target, book, students, points)
        print(f"check: {system}'s import CSV of {len(students)} students written to {target}",
              file=progress)
    if feedback and graded_files:
        print(f"check: {len(graded_files)} feedback files written into {feedback}", file=progress)
    if not graded_files:
        print(f"check: no file to grade in {', '.join(map(shown, paths))}", file=out)
        return 2
    statuses = [r.status for r, _ in results if not r.helper]
    return max(statuses + ([1] if missing else []))


def check_targets(gradebook=None, feedback=None, lms=(), students=None):
    """Refuse, before any file is graded, a target that could not be written: the gradebook, the
    feedback folder, each LMS export (and a roster without the ids that LMS matches by); an
    OSError or RosterProblem whose message starts with the option's name."""
    if gradebook is not None:
        atomic.check_target("--gradebook", gradebook)
    if feedback is not None:
        atomic.check_folder("--feedback", feedback)
    for system, target in lms:
        if system not in gradebook_rows.LMS:
            raise gradebook_rows.RosterProblem(f"--lms: expected one of {list(gradebook_rows.LMS)}, "
                                               f"got {system!r}")
        gradebook_rows.check_lms(system, students)
        atomic.check_target(f"--lms {system}", target)
