"""The slow work done in other processes, started as soon as the tests are collected: every
tutorial script, every tutorial as a notebook in a Jupyter kernel, and the figures from an
installed wheel and from this checkout. They run on the second core while this process works through the other tests;
the tests that read them wait for them (``result``).

Only what the collected tests need is started: ``pytest tests/test_fits.py`` starts nothing.
"""
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TUTORIALS = sorted((ROOT / "tutorials").glob("[0-9][0-9]_*.py"))
#: Every tutorial opens as a notebook.
NOTEBOOKS = TUTORIALS
FRAMEWORKS_TUTORIAL = "07_from_numpy_to_frameworks.py"
#: The first cell given to tutorial 07's kernel: from then on, importing torch or tensorflow
#: raises ModuleNotFoundError there, as on a machine without them (importing both would cost
#: the kernel some 10 s; 07's run with them is tests/test_frameworks_tutorial.py's).
HIDE_FRAMEWORKS = f"""import sys
sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
from _hide_frameworks import HideFrameworks
sys.meta_path.insert(0, HideFrameworks())
del sys.path[0]"""
#: What runs between two notebooks in one kernel: the frameworks shown again, every name gone.
RESET = """import sys
sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != "HideFrameworks"]
%reset -f"""
#: The notebooks that take longest (CPU seconds measured headless: 08 4.5, 06 4.3, 04 2.7), run
#: first, so that the last to finish is a short one.
LONGEST_FIRST = ("08_a_real_task.py", "06_side_by_side.py", "04_layer_splitting.py")

_started = {}
_folders = []


#: The background jobs' niceness: the test process, whose tests are the suite's longest path,
#: gets the CPU first, and the jobs the rest (they are all done before it asks for them).
NICE = 10


def _lower_priority():
    os.nice(NICE)


#: For a child process (``preexec_fn``): run at niceness NICE; None where there is no os.nice
#: (Windows, where Popen takes no preexec_fn): the jobs then run at the same priority.
lower_priority = _lower_priority if hasattr(os, "nice") else None


def tutorial_env():
    """Headless, this checkout's mlp_ref, and one BLAS thread: the tutorials' matrices are tiny,
    and when several processes share two cores, OpenBLAS threads spinning on an 8 x 8 or
    32 x 32 eigh can make it ten times slower than one thread."""
    return dict(os.environ, MPLBACKEND="Agg", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
                MKL_NUM_THREADS="1",
                PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))


def headless(path):
    """The command line of a tutorial; 07 with PyTorch and TensorFlow hidden, as on a machine with
    only numpy and matplotlib (its run with them is tests/test_frameworks_tutorial.py's)."""
    if path.name == "07_from_numpy_to_frameworks.py":
        return [str(Path(__file__).resolve().parent / "_hide_frameworks.py"), str(path)]
    return [str(path)]


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str

    @classmethod
    def of(cls, proc, out, err):
        """The finished ``proc``'s Run, read from (and closing) the files it wrote to."""
        proc.wait(timeout=600)
        texts = []
        for f in (out, err):
            f.seek(0)
            texts.append(f.read())
            f.close()
        return cls(proc.returncode, *texts)


class _Tutorials:
    """Every tutorial (or those ``names``), run once, headless, all at the same time."""

    def __init__(self, folder, names=None):
        self.procs = {}
        for p in TUTORIALS if names is None else [p for p in TUTORIALS if p.name in names]:
            out, err = open(folder / f"{p.stem}.out", "w+"), open(folder / f"{p.stem}.err", "w+")
            proc = subprocess.Popen([sys.executable, *headless(p)], stdin=subprocess.DEVNULL,
                                    preexec_fn=lower_priority,
                                    stdout=out, stderr=err, text=True, env=tutorial_env(), cwd=ROOT)
            self.procs[p.name] = (proc, out, err)

    def result(self):
        """name -> Run."""
        runs = {}
        for name, (proc, out, err) in self.procs.items():
            runs[name] = Run.of(proc, out, err)
        return runs

    def stop(self):
        for proc, _, _ in self.procs.values():
            if proc.poll() is None:
                proc.kill()


def wheel_figures(tmp):
    """Build the wheel from a copy of the sources, install it into a fresh virtual environment
    that sees numpy and matplotlib but not this checkout, and run ``python -m mlp_ref figures``
    there from an empty folder: every figure, so that it is also the second run of each.
    Returns (folder of PNGs, stdout, the mlp_ref it imported, its console script)."""
    src, dist, venv, cwd, out = (tmp / name for name in ("src", "dist", "venv", "cwd", "out"))
    src.mkdir()
    for name in ("setup.cfg", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "mlp_ref", src / "mlp_ref", ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # one BLAS thread, as this test process computes (conftest.py): the figures compared bit for
    # bit with the wheel's are drawn at round-off level, which depends on the thread count
    env.update(MPLBACKEND="Agg", PIP_DISABLE_PIP_VERSION_CHECK="1", OPENBLAS_NUM_THREADS="1",
               OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")

    def run(*cmd, **kw):
        return subprocess.run(cmd, check=True, capture_output=True, text=True, env=env, timeout=600,
                              preexec_fn=lower_priority, **kw)

    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(dist), str(src))
    wheel, = dist.glob("mlp_ref-*.whl")
    run(sys.executable, "-m", "venv", "--without-pip", str(venv))
    python = str(venv / "bin" / "python")
    site = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    run(sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target", str(site), str(wheel))
    # numpy and matplotlib from this interpreter's site-packages: a .pth line adds that folder
    # to sys.path without running its own .pth files (so no editable install of this checkout)
    import matplotlib
    import numpy
    deps = {str(Path(m.__file__).parents[1]) for m in (numpy, matplotlib)}
    (site / "deps.pth").write_text("\n".join(sorted(deps)) + "\n")
    cwd.mkdir()
    where = run(python, "-c", "import mlp_ref; print(mlp_ref.__file__)", cwd=cwd).stdout.strip()
    script = run(python, "-c", "from importlib.metadata import distribution; print([e.value for e in "
                 "distribution('mlp-ref').entry_points if e.name == 'mlp-ref'])", cwd=cwd).stdout.strip()
    res = run(python, "-m", "mlp_ref", "figures", "--out", str(out), cwd=cwd)
    return out, res.stdout, where, script


def checkout_figures(tmp):
    """``python -m mlp_ref figures --out DIR`` from this checkout, in a process of its own with
    one BLAS thread (as the wheel's run): the second run of every figure, in another process.
    Returns (folder of PNGs, stdout)."""
    out = tmp / "checkout"
    res = subprocess.run([sys.executable, "-m", "mlp_ref", "figures", "--out", str(out)], check=True,
                         capture_output=True, text=True, env=tutorial_env(), cwd=tmp, timeout=600,
                         preexec_fn=lower_priority)
    return out, res.stdout


class _Figures:
    """The command ``figures`` twice, each in a thread (the work is in child processes): from
    an installed wheel (``wheel_figures``) and from this checkout (``checkout_figures``)."""

    RUNS = {"wheel": wheel_figures, "checkout": checkout_figures}

    def __init__(self, folder):
        self.outcome = {name: {} for name in self.RUNS}
        self.threads = [threading.Thread(target=self._run, args=(name, folder), daemon=True)
                        for name in self.RUNS]
        for thread in self.threads:
            thread.start()

    def _run(self, name, folder):
        try:
            self.outcome[name]["result"] = self.RUNS[name](folder)
        except subprocess.CalledProcessError as exc:
            self.outcome[name]["error"] = f"{exc.cmd}: {exc.stderr[-3000:]}"

    def result(self):
        """{"wheel": {"result": wheel_figures(...)} or {"error": what failed}, "checkout": ...}."""
        for thread in self.threads:
            thread.join(timeout=900)
        return self.outcome

    def stop(self):
        pass


#: ``python -m mlp_ref bench`` on sizes so tiny that only the machinery is measured
TINY_BENCH = ["bench", "--sizes", "5,4,3", "--batch", "8", "--repeats", "2", "--dense-repeats", "1",
              "--memory-rows", "4,8", "--dtype", "float64"]


class _Bench:
    """The bench command end to end (``TINY_BENCH --json``), in a process of its own, with one
    BLAS thread: on sizes this tiny, idle OpenBLAS threads spinning beside the suite's other
    processes would cost more than the whole bench. Its own child processes, one per group of
    measurements, make it slow to start and light to run: it waits in the background.
    ``result()``: (Run, the JSON path)."""

    def __init__(self, folder):
        self.path = folder / "bench.json"
        self.out, self.err = open(folder / "bench.out", "w+"), open(folder / "bench.err", "w+")
        env = dict(tutorial_env(), OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        self.proc = subprocess.Popen([sys.executable, "-m", "mlp_ref", *TINY_BENCH, "--json", str(self.path)],
                                     stdin=subprocess.DEVNULL, stdout=self.out, stderr=self.err,
                                     text=True, env=env, cwd=folder, preexec_fn=lower_priority)

    def result(self):
        return Run.of(self.proc, self.out, self.err), self.path

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()


class _Notebooks:
    """Every tutorial converted by jupytext and executed by nbclient in a real Jupyter kernel,
    in a thread (the kernels are processes of their own); tutorial 07 with the frameworks hidden.

    Two kernels (two cores) take the notebooks one after another from one queue, the longest
    first, with ``RESET`` (``%reset -f``) between two notebooks: every name a notebook uses must
    come from its own cells, as in a fresh kernel, while the modules already imported stay
    loaded; starting a kernel costs about 2.5 s of CPU, more than most tutorials themselves.

    ``result()``: {"notebooks": name -> executed notebook} or {"error": ...}; {"missing": the
    module} when the [notebooks] extra is not installed (the test then skips or fails, _extras)."""

    EXTRA = ("jupytext", "nbclient", "ipykernel", "nbformat")
    KERNELS = 2

    def __init__(self, folder):
        self.outcome = {}
        try:
            for module in self.EXTRA:
                __import__(module)
        except ImportError:
            self.outcome["missing"] = module
            self.thread = None
            return
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        import jupytext
        import nbclient
        import nbformat
        from jupyter_client.manager import AsyncKernelManager

        converted = {p.name: jupytext.read(p) for p in NOTEBOOKS}
        converted[FRAMEWORKS_TUTORIAL].cells.insert(0, nbformat.v4.new_code_cell(HIDE_FRAMEWORKS))
        reset = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(RESET)])
        queue = [n for n in LONGEST_FIRST if n in converted] + [n for n in converted
                                                                 if n not in LONGEST_FIRST]

        def client(nb, km):
            return nbclient.NotebookClient(nb, km=km, timeout=300, kernel_name="python3",
                                           resources={"metadata": {"path": str(ROOT)}})

        async def lane():
            km = AsyncKernelManager(kernel_name="python3")
            await km.start_kernel(env=tutorial_env(), cwd=str(ROOT))
            if hasattr(os, "setpriority"):
                os.setpriority(os.PRIO_PROCESS, km.provisioner.pid, NICE)
            try:
                first = True
                while queue:
                    name = queue.pop(0)
                    if not first:
                        await client(reset, km).async_execute()
                    first = False
                    await client(converted[name], km).async_execute()
            finally:
                await km.shutdown_kernel(now=True)

        try:
            async def run_all():
                await asyncio.gather(*(lane() for _ in range(self.KERNELS)))
            asyncio.run(run_all())
            hide = converted[FRAMEWORKS_TUTORIAL].cells.pop(0)
            assert hide.source == HIDE_FRAMEWORKS and not hide.outputs, hide
            self.outcome["notebooks"] = converted
        except Exception as exc:               # a failing cell: the tests report it
            self.outcome["error"] = f"{type(exc).__name__}: {exc}"[-5000:]

    def result(self):
        if self.thread is not None:
            self.thread.join(timeout=900)
        return self.outcome

    def stop(self):
        pass


def _tutorial_07(folder):
    return _Tutorials(folder, ["07_from_numpy_to_frameworks.py"])


#: test file -> (job, how to start it). A job is started once: test_tutorials.py comes first, so
#: when both it and test_frameworks_tutorial.py are collected, every tutorial runs.
_JOBS = {"test_tutorials.py": ("tutorials", _Tutorials),
         "test_frameworks_tutorial.py": ("tutorials", _tutorial_07),
         "test_figures.py": ("figures", _Figures),
         "test_notebooks.py": ("notebooks", _Notebooks),
         "test_bench.py": ("bench", _Bench)}


def start(test_files):
    """Start the jobs that the collected test files (their names) read."""
    for file, (name, job) in _JOBS.items():
        if file in test_files and name not in _started:
            folder = Path(tempfile.mkdtemp(prefix=f"mlp-ref-{name}-"))
            _folders.append(folder)
            _started[name] = job(folder)


_results = {}


def result(name):
    """The result of a started job (started now if it was not: a test run on its own)."""
    if name not in _results:
        if name not in _started:
            start({file for file, (job, _) in _JOBS.items() if job == name})
        _results[name] = _started[name].result()
    return _results[name]


def stop():
    for job in _started.values():
        job.stop()
    for folder in _folders:
        shutil.rmtree(folder, ignore_errors=True)
