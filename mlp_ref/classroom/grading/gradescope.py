"""Gradescope's autograder for one exercise: ``python -m mlp_ref gradescope EXERCISE --out autograder.zip``.

The zip holds what Gradescope's specification asks for at its root
(https://gradescope-autograders.readthedocs.io/en/latest/specs/):

* ``setup.sh``, run once as root when Gradescope builds the image: it installs mlp-ref from the
  wheel inside the zip (numpy and matplotlib come through pip, the only network it uses), with a
  Python 3.11 or newer (Ubuntu 22.04's python3 is 3.10: then it installs python3.11 with apt);
* ``run_autograder``, run for each submission from ``/autograder``: it grades the ``.py`` file of
  ``$GRADESCOPE_ROOT/submission/`` (default ``GRADESCOPE_ROOT=/autograder``) as ``check`` does,
  each function in a child process with its time limit, and writes
  ``$GRADESCOPE_ROOT/results/results.json``: ``score``, ``output`` (the report the student would
  read from ``check``), ``visibility``, ``stdout_visibility``, and one entry of ``tests`` per
  function and prediction (``name``, ``score``, ``max_score``, ``status`` passed or failed,
  ``output``: its line and hint, ``visibility``), with the points of ``answers.points``.

``results.json`` is written whatever the submission does: before grading, a score of 0 saying
that the grading did not finish (what Gradescope then shows if its own timeout stops everything),
replaced by the grade; a file that crashes, hangs, exits or cannot be read scores 0 with the
reason; a failure of the grader itself too. Each write is atomic (``files/atomic.py``).
"""
from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from ...files import atomic
from . import TIME_LIMIT, FileProblem, grade_file, read_source, recognised_exercise, report, shown
from .answers import EXERCISES, points
from .gradebook import graded, score

#: The folder that holds mlp_ref/, setup.cfg and pyproject.toml in a checkout (the wheel's source)
SOURCE = Path(__file__).resolve().parents[3]

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, as root, while it builds the autograder's image: install mlp-ref
# (numpy and matplotlib come through pip) from the wheel beside this script.
set -euo pipefail
cd "$(dirname "$0")"
PYTHON=python3
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    # mlp-ref needs Python 3.11 or newer; Ubuntu 22.04's python3 is 3.10
    apt-get update && apt-get install -y python3.11 python3-pip
    PYTHON=python3.11
fi
command -v "$PYTHON" > python_path
# Ubuntu 24.04 marks its Python as managed by apt (PEP 668); the image is ours alone
PIP_BREAK_SYSTEM_PACKAGES=1 "$PYTHON" -m pip install --no-cache-dir ./{wheel}
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for each submission: grade $GRADESCOPE_ROOT/submission/ (default
# /autograder) as exercise {exercise}, write $GRADESCOPE_ROOT/results/results.json.
ROOT="${{GRADESCOPE_ROOT:-/autograder}}"
PYTHON="$(cat "$ROOT/source/python_path" 2>/dev/null || echo python3)"
# -I: the submission's folder and PYTHONPATH never stand in for mlp_ref or numpy
cd "$ROOT" && exec "$PYTHON" -I -m mlp_ref.classroom.grading.gradescope {exercise} --time-limit {time_limit:g}
"""


class BuildProblem(Exception):
    """The zip cannot be built: one line says why."""


def build_wheel(folder, log=print):
    """mlp-ref's wheel, built from this checkout into ``folder`` by pip (setuptools, without
    build isolation: nothing is downloaded); its path."""
    if not (SOURCE / "setup.cfg").is_file():
        raise BuildProblem(f"the wheel is built from mlp-ref's source tree (a checkout with "
                           f"setup.cfg); {SOURCE} has none")
    src = Path(folder) / "src"
    src.mkdir()
    for name in ("setup.cfg", "pyproject.toml", "README.md", "LICENSE"):
        if (SOURCE / name).is_file():
            shutil.copy(SOURCE / name, src / name)
    shutil.copytree(SOURCE / "mlp_ref", src / "mlp_ref", ignore=shutil.ignore_patterns("__pycache__"))
    log("gradescope: building mlp-ref's wheel (pip wheel --no-deps) ...")
    res = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                          "--no-index", "-w", str(Path(folder) / "dist"), str(src)],
                         capture_output=True, text=True,
                         env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    wheels = sorted((Path(folder) / "dist").glob("mlp_ref-*.whl"))
    if res.returncode != 0 or len(wheels) != 1:
        tail = (res.stderr or res.stdout).strip().splitlines()[-1:] or ["no output"]
        raise BuildProblem(f"pip could not build the wheel: {tail[0]}")
    return wheels[0]


def build(exercise, out, time_limit=TIME_LIMIT, log=print):
    """Write the autograder zip of ``exercise`` to ``out`` (atomically); its list of names."""
    with tempfile.TemporaryDirectory(prefix="mlp_ref_gradescope_") as folder:
        wheel = build_wheel(folder, log)
        files = {"setup.sh": SETUP_SH.format(wheel=wheel.name),
                 "run_autograder": RUN_AUTOGRADER.format(exercise=exercise, time_limit=time_limit)}
        data = io.BytesIO()
        with zipfile.ZipFile(data, "w", zipfile.ZIP_DEFLATED) as z:
            for name, text in files.items():
                info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
                info.external_attr = 0o100755 << 16              # executable scripts
                info.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(info, text)
            z.write(wheel, wheel.name)
        atomic.write_atomically("--out", out, lambda f: f.write(data.getvalue()))
        return sorted([*files, wheel.name])


# -- run_autograder's side ---------------------------------------------------------------------
def results(exercise, result=None, problem=""):
    """Gradescope's results.json (a dict) for a graded ``result`` of ``exercise``, or for a
    submission that could not be graded at all (``problem``): score 0 of every test."""
    tests = []
    verdicts = {} if result is None else {v.function: v for v in result.verdicts + result.predictions}
    reason = problem or (result.problem if result is not None else "")
    for item in graded(exercise):
        top = points(exercise, item)
        v = verdicts.get(item)
        passed = v is not None and v.status == "PASS" and not reason
        if v is None:
            output = reason or "not graded"
        else:
            output = "PASS" if passed else f"{v.status} {v.what}".strip()
            output += f"\nhint: {v.hint}" if v.hint else ""
        tests.append({"name": item, "score": top if passed else 0.0, "max_score": top,
                      "status": "passed" if passed else "failed", "output": output,
                      "visibility": "visible"})
    got = score(result)[0] if result is not None and not problem else 0.0
    output = report(result) if result is not None else f"cannot be graded: {problem}"
    return {"score": got, "output": output, "visibility": "visible",
            "stdout_visibility": "hidden", "tests": tests}


def _write(path, data):
    atomic.make_folder("results", os.path.dirname(path))
    atomic.write_atomically("results", path,
                            lambda f: f.write((json.dumps(data, indent=1) + "\n").encode("utf-8")))


def submitted_file(folder, exercise):
    """The ``.py`` file of ``folder`` that answers ``exercise`` (its EXERCISE constant or its
    name), else its only ``.py`` file; FileProblem when there is none or no way to choose."""
    files = sorted(f for f in Path(folder).rglob("*.py") if "__pycache__" not in f.parts)
    if not files:
        raise FileProblem(f"no .py file was submitted (expected your {exercise}.py)")
    mine = []
    for f in files:
        try:
            if recognised_exercise(read_source(f), f) == exercise:
                mine.append(f)
        except FileProblem:
            continue
    if len(mine) == 1 or (not mine and len(files) == 1):
        return (mine or files)[0]
    names = ", ".join(shown(f.name) for f in (mine or files))
    raise FileProblem(f"{'several files answer' if mine else 'no file answers'} {exercise} "
                      f"({names}): submit one file with EXERCISE = {exercise!r}")


def run(exercise, root, time_limit=TIME_LIMIT):
    """Grade ``root``/submission as ``exercise``; write ``root``/results/results.json. Returns 0."""
    target = os.path.join(root, "results", "results.json")
    _write(target, results(exercise, problem="the grading did not finish (stopped by Gradescope's "
                                             "own time limit?)"))
    started = time.monotonic()
    try:
        path = submitted_file(os.path.join(root, "submission"), exercise)
        result = grade_file(path, time_limit, exercise=exercise)
        data = results(exercise, result)
    except FileProblem as problem:
        data = results(exercise, problem=str(problem))
    except Exception as exc:                      # noqa: BLE001 - results.json is written anyway
        data = results(exercise, problem=f"the autograder failed ({type(exc).__name__}: {exc}); "
                                         f"tell your teacher")
    data["execution_time"] = round(time.monotonic() - started, 3)
    _write(target, data)
    print(data["output"])
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m mlp_ref.classroom.grading.gradescope",
                                     description="run_autograder's grading of one submission")
    parser.add_argument("exercise", choices=list(EXERCISES))
    parser.add_argument("--time-limit", type=float, default=TIME_LIMIT)
    args = parser.parse_args(argv)
    return run(args.exercise, os.environ.get("GRADESCOPE_ROOT", "/autograder"), args.time_limit)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
