"""The classroom runs the BLAS on one thread, chosen by the package (mlp_ref/fast/threads.py): through
threadpoolctl where it is installed, else by starting the command again with the variables set
before NumPy loads; a user's own choice is kept, and ``bench`` keeps the library's threads."""
import os
import subprocess
import sys

import pytest
from _extras import require
from _runs import ROOT

#: A program that chooses its BLAS threads as a command does, and says what it saw.
PROGRAM = """
import os, sys
import numpy
from mlp_ref.fast import threads
print("started with", os.environ.get("OPENBLAS_NUM_THREADS"), os.getpid(), flush=True)
print("chosen:", threads.one_blas_thread(sys.orig_argv))
print("ends with", os.environ.get("OPENBLAS_NUM_THREADS"), os.getpid(), sys.argv[1:])
"""


def run(tmp_path, *args, hide_threadpoolctl=False, **env):
    """Run PROGRAM (or ``python -m mlp_ref ARGS`` when args start with "-m") with the BLAS
    variables cleared but ``env``; with ``hide_threadpoolctl``, importing it fails in every
    process started, as where it is not installed."""
    environ = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")
               and k != "VECLIB_MAXIMUM_THREADS"}
    path = [str(ROOT)]
    if hide_threadpoolctl:
        (tmp_path / "hidden").mkdir(exist_ok=True)
        (tmp_path / "hidden" / "threadpoolctl.py").write_text("raise ImportError('hidden by the test')\n")
        path.insert(0, str(tmp_path / "hidden"))
    environ.update(env, PYTHONPATH=os.pathsep.join(path))
    if args[:1] not in (("-m",), ("-c",)):
        (tmp_path / "program.py").write_text(PROGRAM)
        args = (str(tmp_path / "program.py"), *args)
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=environ,
                          cwd=tmp_path, timeout=120)


def test_without_threadpoolctl_a_command_starts_again_with_one_thread(tmp_path):
    res = run(tmp_path, "--an-argument", hide_threadpoolctl=True)
    assert res.returncode == 0, res.stderr
    first, second, chosen, last = res.stdout.splitlines()
    assert first.startswith("started with None") and second.startswith("started with 1")
    assert first.split()[-1] == second.split()[-1] == last.split()[-2]      # the same process, execv
    assert chosen == "chosen: 1 thread (the variables set before NumPy loaded: the command started again)"
    assert last.startswith("ends with 1") and last.endswith("['--an-argument']")


def test_a_users_choice_is_kept(tmp_path):
    res = run(tmp_path, hide_threadpoolctl=True, OPENBLAS_NUM_THREADS="2")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert len(lines) == 3 and lines[0].startswith("started with 2")            # no second start
    assert lines[1] == "chosen: the user's OPENBLAS_NUM_THREADS=2"


def test_with_threadpoolctl_the_loaded_blas_runs_one_thread(tmp_path):
    require("threadpoolctl", "test")
    code = ("import numpy, threadpoolctl\nfrom mlp_ref.fast import threads\n"
            "print(threads.one_blas_thread())\n"
            "print(sorted({p['num_threads'] for p in threadpoolctl.threadpool_info() "
            "if p['user_api'] == 'blas'}))\nprint(threads.describe())")
    res = run(tmp_path, "-c", code, OMP_PROC_BIND="false")
    assert res.returncode == 0, res.stderr
    chosen, counts, described = res.stdout.splitlines()
    assert chosen == "1 thread (threadpoolctl)" and counts == "[1]"
    assert described == "BLAS threads: 1; chosen: 1 thread (threadpoolctl)"


@pytest.mark.slow
def test_a_command_without_threadpoolctl_gives_the_same_output(tmp_path):
    # `stages` started again with one thread prints what it prints with the user's one thread
    again = run(tmp_path, "-m", "mlp_ref", "stages", hide_threadpoolctl=True)
    kept = run(tmp_path, "-m", "mlp_ref", "stages", hide_threadpoolctl=True, OPENBLAS_NUM_THREADS="1")
    assert again.returncode == kept.returncode == 0, again.stderr + kept.stderr
    assert again.stdout == kept.stdout and "dW1" in again.stdout and again.stderr == ""
