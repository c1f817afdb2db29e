"""Gradescope's autograder, end to end off Gradescope: the zip ``python -m mlp_ref gradescope``
builds, laid out as Gradescope lays it (its contents in ``source/``, ``run_autograder`` at the
root, ``submission/``, ``results/``) in a temporary ``GRADESCOPE_ROOT``; ``source/setup.sh``
installs the wheel inside the zip into a fresh virtual environment whose ``python3`` comes first
on PATH; ``run_autograder`` grades a correct, a wrong, a crashing, a hanging and an exiting
submission, and each time writes ``results/results.json`` in the schema of Gradescope's
specification (https://gradescope-autograders.readthedocs.io/en/latest/specs/).

The venv sees this interpreter's packages (numpy, matplotlib, pip) through a folder of links that
leaves out mlp_ref's editable install of this checkout, so setup.sh's pip downloads nothing and
the autograder can only import mlp_ref from the wheel. Slow: a venv, a wheel and children.
"""
import json
import os
import stat
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from mlp_ref.classroom import grading
from mlp_ref.classroom.grading import answers

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
EXERCISE = "07_gram_trick"
SOLUTION = (ROOT / "tutorials" / "exercises" / "solutions" / f"{EXERCISE}.py").read_text()
LIMIT = 3


def _env(venv):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GRADESCOPE_ROOT")}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env['PATH']}", PIP_DISABLE_PIP_VERSION_CHECK="1",
               PIP_NO_INDEX="1")                  # the test downloads nothing
    return env


@pytest.fixture(scope="module")
def autograder(tmp_path_factory):
    """(GRADESCOPE_ROOT, env, the names in the zip): the zip built, unpacked, set up."""
    tmp = tmp_path_factory.mktemp("gradescope")
    res = subprocess.run([sys.executable, "-m", "mlp_ref", "gradescope", EXERCISE, "--out",
                          str(tmp / "autograder.zip"), "--time-limit", str(LIMIT)],
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert res.returncode == 0, res.stderr
    root = tmp / "autograder"
    with zipfile.ZipFile(tmp / "autograder.zip") as z:
        names = z.namelist()
        z.extractall(root / "source")
        for info in z.infolist():                 # zipfile does not restore the modes
            os.chmod(root / "source" / info.filename, (info.external_attr >> 16) & 0o777 or 0o644)
    (root / "run_autograder").write_bytes((root / "source" / "run_autograder").read_bytes())
    os.chmod(root / "run_autograder", 0o755)
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = Path(subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; "
                                "print(sysconfig.get_paths()['purelib'])"], capture_output=True,
                               text=True, check=True).stdout.strip())
    links = tmp / "links"
    links.mkdir()
    here = Path(sysconfig.get_paths()["purelib"])
    for entry in here.iterdir():
        if not entry.name.startswith(("mlp_ref", "__editable__", "mlp-ref")) and entry.suffix != ".pth":
            (links / entry.name).symlink_to(entry)
    (site / "deps.pth").write_text(f"{links}\n")
    env = _env(venv)
    res = subprocess.run(["bash", str(root / "source" / "setup.sh")], capture_output=True, text=True,
                         env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    return root, env, names


def grade(autograder, source, name=f"{EXERCISE}.py"):
    root, env, _ = autograder
    for folder in ("submission", "results"):
        path = root / folder
        if path.exists():
            for f in path.iterdir():
                f.unlink()
        path.mkdir(exist_ok=True)
    (root / "submission" / name).write_text(source)
    res = subprocess.run([str(root / "run_autograder")], cwd="/", capture_output=True, text=True,
                         env={**env, "GRADESCOPE_ROOT": str(root)}, timeout=120)
    assert res.returncode == 0, res
    data = json.loads((root / "results" / "results.json").read_text())
    check_schema(data)
    return data


def check_schema(data):
    """Gradescope's documented fields, with their types, and a score that is the tests' sum."""
    assert {"score", "output", "visibility", "stdout_visibility", "tests"} <= set(data)
    assert data["visibility"] in ("visible", "hidden", "after_due_date", "after_published")
    assert [t["name"] for t in data["tests"]] == grading.graded(EXERCISE)
    for t in data["tests"]:
        assert set(t) == {"name", "score", "max_score", "status", "output", "visibility"}
        assert t["status"] in ("passed", "failed") and isinstance(t["output"], str)
        assert t["max_score"] == answers.points(EXERCISE, t["name"])
        assert t["score"] == (t["max_score"] if t["status"] == "passed" else 0)
    assert data["score"] == sum(t["score"] for t in data["tests"])


def test_the_zip_holds_setup_sh_run_autograder_and_the_wheel_at_its_root(autograder):
    root, env, names = autograder
    assert sorted(names)[:2] == ["mlp_ref-0.1.0-py3-none-any.whl", "run_autograder"] and "setup.sh" in names
    assert os.stat(root / "source" / "setup.sh").st_mode & stat.S_IXUSR
    where = subprocess.run(["python3", "-I", "-c", "import mlp_ref; print(mlp_ref.__file__)"],
                           capture_output=True, text=True, env=env, check=True).stdout
    assert "venv" in where and str(ROOT) not in where          # the wheel's copy


def test_a_correct_submission_gets_every_point(autograder):
    data = grade(autograder, SOLUTION)
    assert data["score"] == sum(answers.points(EXERCISE, i) for i in grading.graded(EXERCISE)) > 0
    assert all(t["status"] == "passed" for t in data["tests"]) and "All done." in data["output"]


def test_a_wrong_submission_gets_the_points_of_what_passes_and_the_hint(autograder):
    right = 'D[f"b{l}"] = weighted.sum(axis=0)'
    assert SOLUTION.count(right) == 1
    data = grade(autograder, SOLUTION.replace(right, 'D[f"b{l}"] = 0 * weighted.sum(axis=0)'),
                 name="mine.py")                  # any name: the assignment says the exercise
    status = {t["name"]: t for t in data["tests"]}
    assert status["vjp_out1"]["status"] == "failed" and "bias's sum left out" in status["vjp_out1"]["output"]
    assert status["jvp_out1"]["status"] == "passed"
    assert data["score"] == sum(answers.points(EXERCISE, i) for i in grading.graded(EXERCISE)) \
        - answers.points(EXERCISE, "vjp_out1")


@pytest.mark.parametrize("what, source, said", [
    ("crashes", SOLUTION.replace("    A, S = out1_signals(net, X)\n    return sum(",
                                 "    import os\n    os.abort()\n    return sum("), "SIGABRT"),
    ("hangs", SOLUTION.replace("    A, S = out1_signals(net, X)\n    return sum(",
                               "    while True:\n        pass\n    return sum("), f"after {LIMIT} s"),
    ("exits", "import os\nos._exit(3)\n", "exit status 3")])
def test_results_json_is_written_whatever_the_submission_does(autograder, what, source, said):
    assert source != SOLUTION
    data = grade(autograder, source)
    jvp = next(t for t in data["tests"] if t["name"] == "jvp_out1")
    assert jvp["status"] == "failed" and jvp["score"] == 0 and said in jvp["output"], (what, data)
    if what == "exits":
        assert data["score"] == 0 and all(t["status"] == "failed" for t in data["tests"])
