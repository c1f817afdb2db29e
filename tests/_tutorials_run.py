"""Tutorials run headless, each in a process of its own, forked from this one.

    python tests/_tutorials_run.py OUT TUTORIAL [TUTORIAL ...]

Starting Python and importing NumPy and mlp_ref costs about 0.4 s of CPU, as much as most
tutorials take to run: this process pays it once, then forks one child per tutorial, one after
another. Each child runs its tutorial as ``python TUTORIAL`` would: ``sys.argv`` is
``[TUTORIAL]``, the tutorial's folder is ``sys.path[0]``, it runs as ``__main__``, an uncaught
exception prints its traceback and exits with status 1, and ``atexit`` runs. Nothing of one
tutorial reaches the next: each child starts from this process as it was after the imports
(``import mlp_ref`` only: a tutorial that uses a module without importing it fails here as it
would alone). 07_from_numpy_to_frameworks.py runs with PyTorch and TensorFlow hidden
(``_hide_frameworks``), as on a machine with only numpy and matplotlib.

Into OUT it writes NAME.stdout, NAME.stderr and NAME.status for each tutorial.
"""
import atexit
import os
import runpy
import subprocess
import sys
import traceback
from pathlib import Path

import mlp_ref  # noqa: F401  (the import every child would otherwise repeat)

from _background import FRAMEWORKS_TUTORIAL
from _hide_frameworks import HideFrameworks


def run_as_script(path):
    """In the child: ``python path``; returns the exit status."""
    sys.argv = [str(path)]
    sys.path[0] = str(path.parent)
    if path.name == FRAMEWORKS_TUTORIAL:
        sys.meta_path.insert(0, HideFrameworks())
    try:
        runpy.run_path(str(path), run_name="__main__")
        return 0
    except SystemExit as exc:
        code = exc.code
        if code is None or isinstance(code, int):
            return code or 0
        print(code, file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        return 1


def run(out, path):
    """Fork, run ``path`` in the child with its output in OUT's files, wait; the status.
    Where there is no fork (Windows), a new Python runs it instead."""
    files = {name: out / f"{path.name}.{name}" for name in ("stdout", "stderr")}
    if not hasattr(os, "fork"):
        script = [str(Path(__file__).parent / "_hide_frameworks.py")] if path.name == FRAMEWORKS_TUTORIAL else []
        with open(files["stdout"], "w") as stdout, open(files["stderr"], "w") as stderr:
            return subprocess.run([sys.executable, *script, str(path)], stdin=subprocess.DEVNULL,
                                  stdout=stdout, stderr=stderr).returncode
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:                                    # the child
        status = 1
        try:
            for fd, name in ((1, "stdout"), (2, "stderr")):
                target = os.open(files[name], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(target, fd)
                os.close(target)
            status = run_as_script(path)
            atexit._run_exitfuncs()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(status)
    _, wait_status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(wait_status)


if __name__ == "__main__":
    out = Path(sys.argv[1])
    for tutorial in map(Path, sys.argv[2:]):
        (out / f"{tutorial.name}.status").write_text(str(run(out, tutorial)))
