"""A class graded in one command: every file a row and a line, a score of a maximum, a feedback
file per submission, a roster's missing students, the LMS's import CSVs with the columns each
vendor documents, and every target refused before any file is graded.

The fast tests grade in this process (``isolate=False``: the same checks, no child) and only
files that do nothing hostile; the command line end to end, with children, is marked slow.
"""
import csv
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mlp_ref.classroom import cli, grading
from mlp_ref.classroom.grading import answers, gradebook
from mlp_ref.classroom.grading.answers import Verdict

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "tutorials" / "exercises" / "solutions"
ONE = "01_layer_backward"

ROSTER = """student,file,ID,SIS User ID,SIS Login ID,Section,Email address,OrgDefinedId
Alice,alice_*.py,101,s101,alice,A,alice@uni.edu,9001
Bob,*_bob.py,102,s102,bob,A,bob@uni.edu,0009002
Carol,carol.py,103,s103,carol,B,carol@uni.edu,9003
Hana,hana*.py,104,s104,hana,B,hana@uni.edu,9004
"""


def a_class(folder):
    """A class folder of every kind of file a teacher meets: right, wrong, no exercise, empty,
    not Python (with and without a line number), a name that is not UTF-8, and two helpers."""
    folder.mkdir()
    text = (SOLUTIONS / f"{ONE}.py").read_text()
    (folder / "alice_01.py").write_text(text)
    wrong = "return da * s * (1.0 - s)"
    assert text.count(wrong) == 1
    (folder / f"{ONE}_bob.py").write_text(text.replace(wrong, "return da * s * (s - 1.0)"))
    (folder / "carol.py").write_text("x = 1\n")                      # no EXERCISE, no known name
    (folder / "dave.py").write_text("")
    (folder / "gus.py").write_text("print(1\n")
    (folder / "ivan.py").write_bytes(b'EXERCISE = "01_layer_backward"\x00\n')
    (folder / os.fsdecode(b"fr\xe9d.py")).write_text(text)
    start = text.index("def sigmoid(z)")
    (folder / "erin_01.py").write_text(text[:start] + "from my_helpers import helper\n" + text[start:])
    (folder / "my_helpers.py").write_text("def helper():\n    return 1\n")
    (folder / "_util.py").write_text("def util():\n    return 2\n")
    return folder


def run(*args, **kwargs):
    out, err = io.StringIO(), io.StringIO()
    status = grading.main(*args, out=out, progress=err, isolate=False, **kwargs)
    return status, out.getvalue(), err.getvalue()


def test_every_file_of_a_class_has_a_row_and_a_line_and_every_roster_student_a_row(tmp_path):
    folder = a_class(tmp_path / "class")
    roster = tmp_path / "roster.csv"
    roster.write_text(ROSTER)
    book = tmp_path / "book.csv"
    status, out, err = run([folder], gradebook=book, roster=roster)
    assert status == 2                                # some files could not be graded
    rows = list(csv.DictReader(book.open(encoding="utf-8")))
    by_file = {Path(r["file"]).name: r for r in rows if r["file"]}
    names = sorted(p.name for p in folder.iterdir())
    assert sorted(by_file) == sorted(gradebook.shown(n) for n in names)   # every .py file: a row
    lines = out.splitlines()
    for name in by_file:                                                # and a line of the report
        assert sum(line.startswith(f"{gradebook.shown(folder)}/{name}: ") for line in lines) == 1, (name, out)
    full = sum(answers.points(ONE, item) for item in grading.graded(ONE))
    assert answers.points(ONE, "sigmoid_backward") > answers.points(ONE, "PREDICT_DW2_COLUMN0")
    assert {k: by_file["alice_01.py"][k] for k in ("student", "score", "max_score")} == {
        "student": "Alice", "score": f"{full:g}", "max_score": f"{full:g}"}
    # bob's sigmoid_backward fails: his score is the points of what passes, of the same maximum
    bob = by_file[f"{ONE}_bob.py"]
    assert bob["student"] == "Bob" and bob["sigmoid_backward"] == "FAIL" and bob["affine_backward"] == "PASS"
    assert float(bob["score"]) == sum(answers.points(ONE, i) for i in grading.graded(ONE)
                                      if bob[i] == "PASS") <= full - answers.points(ONE, "sigmoid_backward")
    reasons = {"carol.py": "not one of the exercises", "dave.py": "the file is empty",
               "gus.py": "syntax error at line 1", "ivan.py": "syntax error: source code string "
               "cannot contain null bytes", "fr\\xe9d.py": "its name is not UTF-8"}
    for name, reason in reasons.items():
        row = by_file[name]
        assert (row["score"], row["max_score"]) == ("0", f"{full:g}") and reason in row["note"], row
    assert "line None" not in out
    assert by_file["erin_01.py"]["exercise"] == ONE                 # graded; it imports a helper
    assert by_file["erin_01.py"]["student"] == "" and "no roster line names this file" in by_file[
        "erin_01.py"]["note"]
    for helper, why in [("my_helpers.py", "erin_01.py imports it"), ("_util.py", "starts with _")]:
        assert why in by_file[helper]["note"] and by_file[helper]["exercise"] == ""
    hana = [r for r in rows if r["student"] == "Hana"]
    assert len(hana) == 1 and hana[0]["file"] == "" and hana[0]["note"].startswith("missing")
    assert (hana[0]["score"], hana[0]["max_score"]) == ("0", f"{full:g}")
    assert "Hana: missing: no file matches 'hana*.py'" in out
    assert f"{len(names) - 2} files graded, 1 student missing" in err


def test_the_exit_status_says_whether_every_file_was_graded(tmp_path):
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "alice_01.py").write_text((SOLUTIONS / f"{ONE}.py").read_text())
    (folder / "_util.py").write_text("x = 1\n")                        # a helper changes nothing
    assert run([folder])[0] == 0
    (folder / "notes.py").write_text("# what I did\n")                # no exercise: not graded
    status, out, _ = run([folder])
    assert status == 2 and "notes.py: cannot be graded: not one of the exercises" in out


def test_each_feedback_file_holds_what_the_file_alone_prints(tmp_path):
    folder = a_class(tmp_path / "class")
    status, out, err = run([folder], feedback=tmp_path / "feedback")
    written = sorted(str(p.relative_to(tmp_path / "feedback")) for p in (tmp_path / "feedback").rglob("*"))
    graded = sorted(p for p in folder.iterdir() if p.name not in ("my_helpers.py", "_util.py"))
    assert written == sorted(gradebook.shown(p.stem) + ".md" for p in graded)
    for path in graded:
        alone = run([path])[1]
        assert (tmp_path / "feedback" / (gradebook.shown(path.stem) + ".md")).read_text() == alone
    bob = (tmp_path / "feedback" / f"{ONE}_bob.md").read_text()
    assert "sigmoid_backward    FAIL  stage dz: yours is da * s * (s - 1)" in bob


def test_two_files_of_one_name_in_two_folders_get_two_feedback_files():
    assert gradebook.feedback_names(["a.py", "week2/a.py", "a.py"]) == ["a.md", "week2/a.md", "a-2.md"]


def _results():
    """Graded files as the grader makes them (no grading needed to test the formats)."""
    functions, predictions = list(answers.EXERCISES[ONE][1]), list(answers.PREDICTIONS[ONE])
    right = grading.Result("c/alice_01.py", ONE, [Verdict(f, "PASS") for f in functions],
                           [Verdict(p, "PASS") for p in predictions])
    half = grading.Result(f"c/{ONE}_bob.py", ONE, [Verdict(f, "PASS" if f == functions[1] else "FAIL")
                                                   for f in functions],
                          [Verdict(p, "PASS") for p in predictions])
    broken = grading.Result("c/carol.py", ONE, problem="the process running it ended (exit status 0)")
    return [(right, "alice_01.py"), (half, f"{ONE}_bob.py"), (broken, "carol.py")]


def _lms(system, tmp_path):
    roster = tmp_path / "roster.csv"
    roster.write_text(ROSTER)
    students = gradebook.read_roster(roster)
    book = gradebook.rows(_results(), students)
    text = gradebook.lms_csv(system, book, students)
    return list(csv.reader(io.StringIO(text))), students


def test_canvas_gets_its_documented_columns(tmp_path):
    """Canvas's grade import: Student, ID, SIS User ID, SIS Login ID, Section, then one column per
    assignment (a new column name makes a new assignment)."""
    rows, _ = _lms("canvas", tmp_path)
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", ONE]
    full = sum(answers.points(ONE, i) for i in grading.graded(ONE))
    bob = full - 2 * answers.points(ONE, "sigmoid_backward")
    assert rows[1:] == [["Alice", "101", "s101", "alice", "A", f"{full:g}"],
                        ["Bob", "102", "s102", "bob", "A", f"{bob:g}"],
                        ["Carol", "103", "s103", "carol", "B", "0"],
                        ["Hana", "104", "s104", "hana", "B", "0"]]


def test_moodle_gets_an_identifier_column_and_a_grade_item(tmp_path):
    """Moodle's CSV import maps one column to a user field ("Email address" to useremail) and each
    other column to a grade item."""
    rows, _ = _lms("moodle", tmp_path)
    assert rows[0] == ["Email address", ONE]
    assert [r[0] for r in rows[1:]] == ["alice@uni.edu", "bob@uni.edu", "carol@uni.edu", "hana@uni.edu"]


def test_brightspace_gets_org_defined_id_points_grades_and_the_end_of_line_indicator(tmp_path):
    """Brightspace's grade import: OrgDefinedId, "<item> Points Grade" per numeric item, and its
    export's End-of-Line Indicator column of '#' (ids carry a '#' so that leading zeros survive)."""
    rows, _ = _lms("brightspace", tmp_path)
    assert rows[0] == ["OrgDefinedId", f"{ONE} Points Grade", "End-of-Line Indicator"]
    assert [r[0] for r in rows[1:]] == ["#9001", "#0009002", "#9003", "#9004"]
    assert all(r[-1] == "#" and len(r) == 3 for r in rows[1:])


def test_an_lms_export_needs_a_roster_with_its_ids(tmp_path):
    roster = tmp_path / "r.csv"
    roster.write_text("student,file\nAlice,alice.py\n")
    students = gradebook.read_roster(roster)
    for system in gradebook.LMS:
        with pytest.raises(gradebook.RosterProblem, match=f"--lms {system}: needs --roster"):
            gradebook.check_lms(system, None)
        with pytest.raises(gradebook.RosterProblem, match=f"--lms {system}: the roster has no"):
            gradebook.check_lms(system, students)


@pytest.mark.parametrize("text, said", [
    ("who,path\nAlice,a.py\n", "has no column student or file"),
    ("student,file\nAlice,\n", "line 2"),
    ("student,file\n", "lists no student"),
    (b"student,file\nJos\xe9,a.py\n", "is not UTF-8 text (byte 16)")])
def test_a_roster_that_cannot_be_used_is_refused(text, said, tmp_path):
    roster = tmp_path / "r.csv"
    (roster.write_bytes if isinstance(text, bytes) else roster.write_text)(text)
    with pytest.raises(gradebook.RosterProblem, match=re.escape(said)):
        gradebook.read_roster(roster)


def test_points_declared_per_exercise_and_changed_on_the_command_line():
    for exercise in answers.EXERCISES:
        for item in grading.graded(exercise):
            kind = "prediction" if item in answers.PREDICTIONS.get(exercise, {}) else "function"
            expected = answers.POINTS.get(exercise, {}).get(item, {
                "function": answers.FUNCTION_POINTS, "prediction": answers.PREDICTION_POINTS}[kind])
            assert answers.points(exercise, item) == expected
    assert answers.FUNCTION_POINTS > answers.PREDICTION_POINTS
    args = cli.build_parser().parse_args(["check", "x.py", "--points", "prediction=0",
                                          "--points", "sigmoid_backward=5"])
    overrides = dict(args.points)
    assert gradebook.max_score(ONE, overrides) == 5 + 2 * answers.FUNCTION_POINTS


@pytest.mark.parametrize("argv", [["--time-limit", "1e18"], ["--time-limit", "1e300"],
                                  ["--time-limit", "1e-300"], ["--time-limit", "nan"],
                                  ["--time-limit", "inf"], ["--points", "nothing=1"],
                                  ["--points", "function=-1"], ["--lms", "blackboard", "x.csv"]])
def test_a_bad_option_is_a_one_line_usage_error(argv, capsys, tmp_path):
    argv = ["check", str(SOLUTIONS / f"{ONE}.py"), *argv]
    try:
        status = cli.main(argv)
    except SystemExit as exc:                     # argparse's own refusal
        status = exc.code
    err = capsys.readouterr().err
    assert status == 2 and "Traceback" not in err and "check: [" not in err
    assert err.strip().splitlines()[-1].startswith(("mlp-ref check: error: argument", "--lms"))


def test_gradescope_refuses_its_zip_before_building_the_wheel(capsys, tmp_path, monkeypatch):
    from mlp_ref.classroom.grading import gradescope
    monkeypatch.setattr(gradescope, "build_wheel", lambda *a, **k: pytest.fail("built before the check"))
    status = cli.main(["gradescope", "07_gram_trick", "--out", str(tmp_path / "missing" / "a.zip")])
    err = capsys.readouterr().err
    assert status == 2 and err.startswith("--out: folder") and "Traceback" not in err


@pytest.mark.parametrize("option, target, said", [
    ("--gradebook", "missing/book.csv", "--gradebook: folder"),
    ("--feedback", "book.csv/feedback", "--feedback: "),
    ("--roster", "no_roster.csv", "--roster: cannot read"),
])
def test_every_target_is_refused_before_any_file_is_graded(option, target, said, capsys, tmp_path,
                                                           monkeypatch):
    (tmp_path / "book.csv").write_text("old")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(grading, "grade_file", lambda *a, **k: pytest.fail("graded before the check"))
    status = cli.main(["check", str(SOLUTIONS / f"{ONE}.py"), option, target])
    err = capsys.readouterr().err
    assert status == 2 and err.startswith(said) and "Traceback" not in err


def test_a_gradebook_that_cannot_be_written_leaves_the_old_one_whole(tmp_path, monkeypatch):
    """Written whole or not at all (files/atomic.py): a disk that fills up midway leaves the old
    gradebook as it was and names the option."""
    import errno
    book = tmp_path / "book.csv"
    book.write_text("the old gradebook\n")

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match="--gradebook: cannot write .*the disk is full"):
        gradebook.write_gradebook(gradebook.rows(_results()), book, False)
    assert book.read_text() == "the old gradebook\n"
    assert [p.name for p in tmp_path.iterdir()] == ["book.csv"]


@pytest.mark.slow
def test_a_class_in_one_command(tmp_path):
    """python -m mlp_ref check, each file in a child: the gradebook, a feedback file per
    submission, the three LMS exports, and a file that exits at import scored 0 with the reason."""
    folder = a_class(tmp_path / "class")
    (folder / "carol.py").write_text(f'EXERCISE = "{ONE}"\nimport os\nos._exit(0)\n')
    (tmp_path / "roster.csv").write_text(ROSTER)
    res = subprocess.run([sys.executable, "-m", "mlp_ref", "check", "class", "--gradebook", "book.csv",
                          "--feedback", "feedback", "--roster", "roster.csv", "--time-limit", "20",
                          *[a for s in gradebook.LMS for a in ("--lms", s, f"{s}.csv")]],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert res.returncode == 2 and "Traceback" not in res.stderr, res
    rows = {Path(r["file"]).name: r for r in csv.DictReader((tmp_path / "book.csv").open(encoding="utf-8"))}
    assert rows["carol.py"]["score"] == "0" and "while importing it" in rows["carol.py"]["note"]
    for name in ("alice_01.py", "erin_01.py"):                     # erin's helper is beside it
        assert rows[name]["score"] == rows[name]["max_score"] != "0", rows[name]
    assert (tmp_path / "feedback" / "carol.md").read_text().startswith("check: class/carol.py: the process")
    for system in gradebook.LMS:
        assert len(list(csv.reader((tmp_path / f"{system}.csv").open()))) == 1 + 4


def test_the_numbers_the_guide_states_of_grading_a_class():
    """tutorials/README.md: the points, the time limit's range, exercise 07's large network."""
    from mlp_ref.classroom.grading import runner
    guide = (ROOT / "tutorials" / "README.md").read_text()
    assert (answers.FUNCTION_POINTS, answers.PREDICTION_POINTS) == (2, 1)
    assert answers.POINTS == {"10_memory_project": {"hold_on_memory": 6}}
    assert "A function is worth 2 points and a prediction 1 by default" in guide
    assert "exercise 10's project `hold_on_memory` 6" in guide
    assert cli.TIME_LIMITS == (0.1, 86400) and "`--time-limit` takes 0.1 s to 86400 s (a\nday)" in guide
    net, X, _, _ = answers._no_dense_setup()
    size = len(X) * net.n_params * 8 / 2 ** 30
    assert (f"{size:.1f}", runner.MEMORY_LIMIT / 2 ** 30, len(X)) == ("2.3", 2, 2048)
    assert "a 3-384-384-2 network on 2048 rows, whose J₁ (2.3 GiB) does not fit in the child's 2 GiB" in guide
    assert len(answers.frozen_layers_memories()[1]) == 5 and "five memories, two of 32 rows" in guide
