"""A class's grades as a course keeps them: the roster, a score per file, the gradebook CSV, the
import CSV of an LMS, and a feedback file per submission.

* The roster (``--roster CSV``) has a ``student`` and a ``file`` column (a file name, or a glob
  such as ``alice_*.py``, matched against each graded file's name and its path below the folder
  named), and may carry the ids an LMS matches students by: ``ID``, ``SIS User ID``,
  ``SIS Login ID``, ``Section`` (Canvas), ``Email address`` or ``ID number`` (Moodle),
  ``OrgDefinedId`` or ``Username`` (Brightspace). Header names are read without regard to case,
  spaces or underscores, so a gradebook exported from the LMS with a ``file`` column added is a
  roster.
* Each row's ``score`` is the points of what passes, of ``max_score``: the points of every
  function and prediction of its exercise (``answers.points``). A file that cannot be graded
  scores 0 of its exercise's maximum; a roster student with no file gets a row marked missing.
* ``--lms canvas|moodle|brightspace FILE`` writes one row per roster student and one column per
  exercise, the student's best score in it, with the columns that system documents for its
  import (the teacher's guide, tutorials/README.md, cites each vendor's page):

  - Canvas: ``Student, ID, SIS User ID, SIS Login ID, Section``, then one column per assignment;
  - Moodle: the identifier column (``Email address`` or ``ID number``) and one grade item per
    exercise (mapped at import: "Map from" the identifier to the user field, each column to an item);
  - Brightspace: ``OrgDefinedId`` (and ``Username``), ``<item> Points Grade`` per exercise, and
    ``End-of-Line Indicator``; ids and the indicator carry the ``#`` of Brightspace's own export.
"""
from __future__ import annotations

import csv
import fnmatch
import io
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ...files import atomic
from .answers import EXERCISES, PREDICTIONS, points

#: The LMS import formats, each the roster ids it can match a student by (one is needed)
LMS = {"canvas": ("id", "sis_user_id", "sis_login_id"),
       "moodle": ("email_address", "id_number"),
       "brightspace": ("orgdefinedid", "username")}

#: Other spellings of a roster header, to the name used here
_ALIASES = {"email": "email_address", "idnumber": "id_number", "org_defined_id": "orgdefinedid",
            "canvas_id": "id", "name": "student"}


class RosterProblem(ValueError):
    """The roster cannot be used: the message starts with ``--roster``."""
    argument = "--roster"


def shown(path):
    """A path as text that can always be printed and written as UTF-8: a byte of a file name
    that is not UTF-8 is shown as ``\\xNN``."""
    return os.fsencode(os.fspath(path)).decode("utf-8", "backslashreplace")


def _key(header):
    key = re.sub(r"[\s_\-]+", "_", header.strip().lower()).strip("_")
    return _ALIASES.get(key, key)


@dataclass
class Student:
    name: str
    pattern: str
    ids: dict = field(default_factory=dict)     # roster column (normalised) -> value


def read_roster(path):
    """The roster's students, in its order; RosterProblem for a file that cannot be one."""
    try:
        with open(path, "rb") as f:
            raw = f.read(2 ** 24)
    except OSError as exc:
        raise RosterProblem(f"--roster: cannot read {shown(path)!r} ({exc.strerror or exc})") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise RosterProblem(f"--roster: {shown(path)!r} is not UTF-8 text (byte {exc.start}); "
                            f"save it as CSV UTF-8") from None
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        raise RosterProblem(f"--roster: {shown(path)!r} is empty; expected a header student,file")
    keys = [_key(h) for h in rows[0]]
    missing = [c for c in ("student", "file") if c not in keys]
    if missing:
        raise RosterProblem(f"--roster: {shown(path)!r} has no column {' or '.join(missing)} (its "
                            f"header: {rows[0]}); expected student,file")
    students = []
    for number, row in enumerate(rows[1:], 2):
        if not any(cell.strip() for cell in row):
            continue
        values = dict(zip(keys, (cell.strip() for cell in row)))
        if not values.get("student") or not values.get("file"):
            raise RosterProblem(f"--roster: line {number} of {shown(path)!r} needs a student and a "
                                f"file (a name or a glob such as alice_*.py), got {row}")
        students.append(Student(values["student"], values["file"],
                                {k: v for k, v in values.items() if k not in ("student", "file")}))
    if not students:
        raise RosterProblem(f"--roster: {shown(path)!r} lists no student")
    return students


def check_lms(system, students):
    """Refuse (RosterProblem naming --lms) an LMS export whose roster has none of its ids."""
    if students is None:
        raise RosterProblem(f"--lms {system}: needs --roster, whose ids the import matches students by")
    ids = LMS[system]
    if not any(s.ids.get(k) for s in students for k in ids):
        raise RosterProblem(f"--lms {system}: the roster has no {' or '.join(_HEADERS[k] for k in ids)} "
                            f"column filled in; {system} matches students by one of them")


_HEADERS = {"id": "ID", "sis_user_id": "SIS User ID", "sis_login_id": "SIS Login ID",
            "section": "Section", "email_address": "Email address", "id_number": "ID number",
            "orgdefinedid": "OrgDefinedId", "username": "Username"}


def matches(student, file, relative):
    """Whether the roster line of ``student`` names ``file`` (its name or its path below the
    folder named, ``relative``)."""
    names = {Path(file).name, relative}
    return any(fnmatch.fnmatchcase(n, student.pattern) for n in names)


# -- scores ------------------------------------------------------------------------------------
def graded(exercise):
    """The functions and the "predict, then run" constants of ``exercise``: what it is graded on."""
    return list(EXERCISES[exercise][1]) + list(PREDICTIONS.get(exercise, {}))


def max_score(exercise, overrides=None):
    return sum(points(exercise, item, overrides) for item in graded(exercise))


def score(result, overrides=None):
    """(score, max_score) of a graded file; a file that cannot be graded scores 0 of its
    exercise's maximum (0 of 0 when no exercise is recognised)."""
    if not result.exercise:
        return 0.0, 0.0
    top = max_score(result.exercise, overrides)
    if result.problem:
        return 0.0, top
    got = sum(points(result.exercise, v.function, overrides)
              for v in result.verdicts + result.predictions if v.status == "PASS")
    return got, top


def _number(x):
    return f"{x:g}"


@dataclass
class Row:
    """One line of the gradebook: a file (maybe of a roster student), or a student with none."""
    student: Student | None
    file: str
    exercise: str
    score: float
    max_score: float
    passed: int | str
    total: int | str
    status: dict
    note: str


def rows(graded_files, students=None, overrides=None):
    """The gradebook's rows: ``graded_files`` is [(Result, relative path)]; every file gets a
    row (its roster student's, or none), then each roster student with no file a row marked
    missing (0 of the class's exercise's maximum when the class answers one exercise)."""
    out, seen = [], set()
    exercises = {r.exercise for r, _ in graded_files if r.exercise and not r.helper}
    only = next(iter(exercises)) if len(exercises) == 1 else ""
    for result, relative in graded_files:
        owners = [s for s in students or () if matches(s, result.path, relative)]
        seen.update(id(s) for s in owners)
        status = {v.function: v.status for v in result.verdicts + result.predictions}
        passed, total = result.passed, result.total
        if result.helper:
            got, top, passed, total = 0.0, 0.0, "", ""
        else:
            got, top = score(result, overrides)
            if result.problem and result.exercise in EXERCISES:
                status, total = dict.fromkeys(graded(result.exercise), "ERROR"), len(graded(result.exercise))
            elif not result.exercise and only:
                top = max_score(only, overrides)          # unrecognised: 0 of the class's exercise
        note = result.helper or result.problem
        if students is not None and not owners and not result.helper:
            note = "; ".join(filter(None, [note, "no roster line names this file"]))
        if len(owners) > 1:
            note = "; ".join(filter(None, [note, f"matched by {len(owners)} roster lines"]))
        for owner in owners or [None]:
            out.append(Row(owner, shown(result.path), result.exercise, got, top, passed, total,
                           status, note))
    for s in students or ():
        if id(s) not in seen:
            out.append(Row(s, "", only, 0.0, max_score(only, overrides) if only else 0.0, 0,
                           len(graded(only)) if only else 0, {}, f"missing: no file matches {s.pattern!r}"))
    return out


def write_gradebook(book, path, with_students):
    """The gradebook CSV: [student,] file, exercise, score, max_score, passed, total, one column
    per function and prediction of the exercises present (PASS/FAIL/TODO/ERROR), note."""
    columns = []
    for exercise in EXERCISES:
        if any(r.exercise == exercise for r in book):
            columns += [c for c in graded(exercise) if c not in columns]
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow((["student"] if with_students else [])
                    + ["file", "exercise", "score", "max_score", "passed", "total", *columns, "note"])
    for r in book:
        writer.writerow(([r.student.name if r.student else ""] if with_students else [])
                        + [r.file, r.exercise, _number(r.score), _number(r.max_score), r.passed,
                           r.total, *[r.status.get(c, "") for c in columns], r.note])
    atomic.write_atomically("--gradebook", path, lambda f: f.write(text.getvalue().encode("utf-8")))


def _best(book, students):
    """Per roster student, per exercise: the best score of their files, and the exercises."""
    exercises = [e for e in EXERCISES if any(r.exercise == e for r in book)]
    best = {id(s): dict.fromkeys(exercises, 0.0) for s in students}
    for r in book:
        if r.student is not None and r.exercise in exercises:
            best[id(r.student)][r.exercise] = max(best[id(r.student)][r.exercise], r.score)
    return exercises, best


def lms_csv(system, book, students, overrides=None):
    """The text of ``system``'s import CSV: a row per roster student, a column per exercise."""
    exercises, best = _best(book, students)
    text = io.StringIO()
    writer = csv.writer(text)
    if system == "canvas":
        writer.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section", *exercises])
        for s in students:
            writer.writerow([s.name, *(s.ids.get(k, "") for k in ("id", "sis_user_id", "sis_login_id",
                                                                      "section")),
                             *(_number(best[id(s)][e]) for e in exercises)])
    elif system == "moodle":
        key = next(k for k in LMS["moodle"] if any(s.ids.get(k) for s in students))
        writer.writerow([_HEADERS[key], *exercises])
        for s in students:
            writer.writerow([s.ids.get(key, ""), *(_number(best[id(s)][e]) for e in exercises)])
    else:
        keys = [k for k in LMS["brightspace"] if any(s.ids.get(k) for s in students)]
        writer.writerow([_HEADERS[k] for k in keys] + [f"{e} Points Grade" for e in exercises]
                        + ["End-of-Line Indicator"])
        for s in students:
            writer.writerow([f"#{s.ids.get(k, '')}" for k in keys]
                            + [_number(best[id(s)][e]) for e in exercises] + ["#"])
    return text.getvalue()


def write_lms(system, path, book, students, overrides=None):
    text = lms_csv(system, book, students, overrides)
    atomic.write_atomically(f"--lms {system}", path, lambda f: f.write(text.encode("utf-8")))


# -- feedback ----------------------------------------------------------------------------------
def feedback_names(relatives):
    """The feedback file of each graded file, by its path below the folder named: ``alice_01.py``
    -> ``alice_01.md``, ``week2/alice.py`` -> ``week2/alice.md``; two files that would share a
    name get ``-2``, ``-3``, ..."""
    taken, names = set(), []
    for relative in relatives:
        stem = str(Path(shown(relative)).with_suffix(""))
        name, n = f"{stem}.md", 1
        while name in taken:
            n += 1
            name = f"{stem}-{n}.md"
        taken.add(name)
        names.append(name)
    return names


def write_feedback(folder, name, text):
    """Write one student's feedback (what single-file mode prints for the file) atomically."""
    path = os.path.join(folder, name)
    atomic.make_folder("--feedback", os.path.dirname(path))
    atomic.write_atomically("--feedback", path, lambda f: f.write((text + "\n").encode("utf-8")))
