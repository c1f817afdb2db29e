"""What the slow tests run in other processes: a tutorial as a script (as a notebook in a Jupyter
kernel: tutorials/notebooks/make.py), the figures command from an installed wheel, the bench
command.

Each is a plain function that runs one thing and returns what it gave; the tests that read it
carry the ``slow`` marker, and the fixtures that call it are scoped so that each runs once per
test process (pytest-xdist spreads the slow files over the cores: ``.ci/run``).
"""
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
TUTORIALS = sorted((ROOT / "tutorials").glob("[0-9][0-9]_*.py"))
#: Every tutorial opens as a notebook.
NOTEBOOKS = TUTORIALS
FRAMEWORKS_TUTORIAL = "07_from_numpy_to_frameworks.py"
#: The first cell given to tutorial 07's kernel: from then on, importing torch, tensorflow, jax
#: or optax raises ModuleNotFoundError there, as on a machine without them (their run with all
#: three is tests/test_frameworks_tutorial.py's).
HIDE_FRAMEWORKS = f"""import sys
sys.path.insert(0, {str(TESTS)!r})
from _hide_frameworks import HideFrameworks
sys.meta_path.insert(0, HideFrameworks())
del sys.path[0]"""
#: ``python -m mlp_ref bench`` on sizes so tiny that only the machinery is measured
TINY_BENCH = ["bench", "--sizes", "5,4,3", "--batch", "8", "--repeats", "2", "--dense-repeats", "1",
              "--memory-rows", "4,8", "--dtype", "float64"]


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str


def tutorial_env():
    """Headless, and this checkout's mlp_ref first on the path. The BLAS threads are the
    caller's: a child computes with as many as this process, so that digits it prints at
    round-off level are the digits this process computes (README, "Reproducibility")."""
    return dict(os.environ, MPLBACKEND="Agg",
                PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))


def run(cmd, timeout=600, **kw):
    """``subprocess.run(cmd)`` with its output captured as text and no standard input; a
    timeout is a Run with returncode None."""
    try:
        res = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                             timeout=timeout, **kw)
    except subprocess.TimeoutExpired as exc:
        return Run(None, exc.stdout or "", f"{exc.stderr or ''}\n[timed out after {timeout} s]")
    return Run(res.returncode, res.stdout, res.stderr)


def run_tutorial(path, *args):
    """``python TUTORIAL`` headless from the project's root; tutorial 07 with PyTorch and
    TensorFlow hidden (``_hide_frameworks``), as on a machine with only numpy and matplotlib."""
    if path.name == FRAMEWORKS_TUTORIAL:
        cmd = [sys.executable, str(TESTS / "_hide_frameworks.py"), str(path), *args]
    else:
        cmd = [sys.executable, str(path), *args]
    return run(cmd, timeout=300, env=tutorial_env(), cwd=ROOT)


def wheel_figures(tmp):
    """Build the wheel from a copy of the sources, install it into a fresh virtual environment
    that sees numpy and matplotlib but not this checkout, and run ``python -m mlp_ref figures``
    there from an empty folder. Returns (folder of PNGs, stdout, the mlp_ref it imported, its
    console script).

    pip builds the wheel with setuptools' PEP 517 hook without build isolation (no download:
    the [test] extra installs setuptools and wheel, which a Python 3.12+ venv lacks) and
    installs it in one command."""
    src, venv, cwd, out = (tmp / name for name in ("src", "venv", "cwd", "out"))
    src.mkdir()
    for name in ("setup.cfg", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "mlp_ref", src / "mlp_ref", ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(MPLBACKEND="Agg", PIP_DISABLE_PIP_VERSION_CHECK="1")

    def checked(*cmd, **kw):
        res = run(list(cmd), env=env, **kw)
        if res.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({res.returncode}):\n{res.stderr[-3000:]}")
        return res

    checked(sys.executable, "-m", "venv", "--without-pip", str(venv))
    python = str(venv / "bin" / "python")
    site = Path(checked(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
                .stdout.strip())
    checked(sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
            "--no-compile", "--target", str(site), str(src))
    if not list(site.glob("mlp_ref-*.dist-info/WHEEL")):          # what a wheel's install leaves
        raise RuntimeError(f"pip did not install mlp_ref from a wheel into {site}")
    # numpy and matplotlib from this interpreter's site-packages: a .pth line adds that folder
    # to sys.path without running its own .pth files (so no editable install of this checkout)
    import matplotlib
    import numpy
    deps = {str(Path(m.__file__).parents[1]) for m in (numpy, matplotlib)}
    (site / "deps.pth").write_text("\n".join(sorted(deps)) + "\n")
    cwd.mkdir()
    res = checked(python, "-I", "-m", "mlp_ref", "figures", "--out", str(out), cwd=cwd)
    where = checked(python, "-I", "-c", "import mlp_ref; print(mlp_ref.__file__)", cwd=cwd).stdout.strip()
    script = checked(python, "-I", "-c", "from importlib.metadata import distribution; print("
                     "[e.value for e in distribution('mlp-ref').entry_points if e.name == 'mlp-ref'])",
                     cwd=cwd).stdout.strip()
    return out, res.stdout, where, script
