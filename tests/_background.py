"""The slow work done in other processes, started as soon as the tests are collected (when the
whole suite runs, as soon as the session starts: tests/conftest.py): every tutorial script,
every tutorial as a notebook in a Jupyter kernel, the figures from an installed wheel (the
second run of each, which tests/test_figures.py compares with an earlier one, and the
measurements they were drawn from, whose claims the tests check: ``figure_data``), and the
bench command. They are tasks of one queue (``_Queue``), run one at a time on the second core
while this process works through the other tests, and two at a time once it waits for them
(``result``).

Only what the collected tests need is started: ``pytest tests/test_fits.py`` starts nothing.
"""
import asyncio
import heapq
import itertools
import os
import pickle
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
#: CPU seconds of the tutorials that take longest headless, about (measured; the others take
#: about TUTORIAL_COST_ELSE): the notebooks run the longest first, so that the last to finish
#: is a short one; the queue weighs the scripts' task by their sum.
TUTORIAL_COST = {"08_a_real_task.py": 4.5, "06_side_by_side.py": 3.6, "04_layer_splitting.py": 2.2}
TUTORIAL_COST_ELSE = 0.5

#: The background jobs' niceness: where a job and the test process share a core, the test
#: process gets it first.
NICE = 10


def lower_priority(pid):
    """Run process ``pid`` at niceness NICE (where the OS has priorities: not on Windows). Set
    from this process once the child runs, not by a ``preexec_fn``, which Python warns may
    deadlock a child forked while other threads run, as the queue's workers do."""
    if hasattr(os, "setpriority"):
        try:
            os.setpriority(os.PRIO_PROCESS, pid, NICE)
        except ProcessLookupError:          # done already
            pass


class _Queue:
    """The background's tasks, the costliest first, run by worker threads, each task one child
    process (or a few, one after another): one worker while the test process runs its own tests
    on the other core, two once it waits for a result (``widen``). No more processes than
    cores: a dozen at once would only share the two, slow each other's caches down, and take
    a third of the core the test process needs, niceness or not.

    Tasks that take their work from a list they share (the notebooks' kernels) go last, after
    every other task whatever its cost: they end together however the work falls between them,
    so the run does not end with one long task on one core and nothing on the other."""

    def __init__(self):
        self._lock = threading.Lock()
        self._heap, self._order, self._workers, self._wide = [], itertools.count(), 0, False
        self.running = set()                    # the Popen objects of the tasks under way

    def submit(self, cost, task, shares=False):
        """Run ``task()`` (which must not raise) in turn, once ``go`` is called; ``cost``: its
        CPU seconds, about; ``shares``: it takes its work from a list other tasks share."""
        with self._lock:
            heapq.heappush(self._heap, (shares, -cost, next(self._order), task))

    def go(self):
        """Start the work (after every task of the run is on the queue: the costliest first)."""
        self._staff()

    def widen(self):
        """The test process waits from now on: two workers (and the work started, if not yet)."""
        self._wide = True
        self._staff()

    def clear(self):
        with self._lock:
            self._heap.clear()

    def _staff(self):
        with self._lock:
            # every worker is busy with a task: as many more as tasks wait, up to the cores
            wanted = max(min(len(self._heap), (2 if self._wide else 1) - self._workers), 0)
            self._workers += wanted
        for _ in range(wanted):
            threading.Thread(target=self._work, daemon=True).start()

    def _work(self):
        while True:
            with self._lock:
                if not self._heap:
                    self._workers -= 1
                    return
                task = heapq.heappop(self._heap)[-1]
            task()


_QUEUE = _Queue()


def _run(cmd, timeout=600, **kw):
    """``subprocess.run(cmd, capture_output=True, text=True)`` at the background's priority,
    killed by ``stop``; a timeout is a Run with returncode None."""
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)
    lower_priority(proc.pid)
    _QUEUE.running.add(proc)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        return Run(None, out, err + f"\n[timed out after {timeout} s]")
    finally:
        _QUEUE.running.discard(proc)
    return Run(proc.returncode, out, err)


def tutorial_env(keep_memory=True):
    """Headless, this checkout's mlp_ref, and one BLAS thread: the tutorials' matrices are tiny,
    and when several processes share two cores, OpenBLAS threads spinning on an 8 x 8 or
    32 x 32 eigh can make it ten times slower than one thread. With glibc keeping freed memory
    unless ``keep_memory`` is False (``kept_memory``)."""
    env = dict(os.environ, MPLBACKEND="Agg", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
               MKL_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    return kept_memory(env) if keep_memory else env


def kept_memory(env):
    """``env`` with glibc keeping freed memory (``bench.KEEP_MEMORY``, the README's setting; the
    test process sets it for itself, conftest.py): a process that makes and frees arrays over
    and over then takes no freed page back from the system one fault at a time, a few percent
    of the suite's CPU. Every process the suite starts runs so but the bench's, which measures
    glibc's defaults for itself."""
    from mlp_ref.bench import KEEP_MEMORY   # here: _tutorials_run.py's tutorials see mlp_ref alone

    tunables = [env.get("GLIBC_TUNABLES"), KEEP_MEMORY["GLIBC_TUNABLES"]]
    return dict(env, GLIBC_TUNABLES=":".join(filter(None, tunables)))


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str


def _checked(cmd, **kw):
    """``_run``, raising CalledProcessError unless the command succeeded."""
    res = _run(cmd, **kw)
    if res.returncode != 0:
        raise subprocess.CalledProcessError(res.returncode, cmd, res.stdout, res.stderr)
    return res


class _Job:
    """Tasks on the queue and what they give: ``add(key, cost, work)`` puts ``work()`` on the
    queue; ``outcome`` maps each key to {"result": what it returned} or {"error": why not}."""

    def __init__(self):
        self.outcome, self._done = {}, {}

    def add(self, key, cost, work, shares=False):
        done = self._done[key] = threading.Event()

        def task():
            try:
                self.outcome[key] = {"result": work()}
            except subprocess.CalledProcessError as exc:
                self.outcome[key] = {"error": f"{exc.cmd}: {exc.stderr[-3000:]}"}
            except Exception as exc:              # a failing cell, a missing file: tests report it
                self.outcome[key] = {"error": f"{type(exc).__name__}: {exc}"[-5000:]}
            finally:
                done.set()
        _QUEUE.submit(cost, task, shares)

    def run(self, key):
        """The Run of the task ``key`` whose work returns one (a failure: a Run with its error)."""
        got = self.wait()[key]
        return got.get("result") or Run(None, "", got["error"])

    def done(self):
        """Every task of the job has ended."""
        return all(event.is_set() for event in self._done.values())

    def wait(self, timeout=900):
        for key, done in self._done.items():
            if not done.wait(timeout):
                self.outcome.setdefault(key, {"error": f"{key}: not done after {timeout} s"})
        return self.outcome


class _Tutorials(_Job):
    """Every tutorial run once, headless, each in a process of its own: forked, one after the
    other, from one that has imported NumPy and mlp_ref once (``_tutorials_run.py``)."""

    def __init__(self, folder, files):
        super().__init__()
        self.folder = folder
        self.add("tutorials", sum(TUTORIAL_COST.get(p.name, TUTORIAL_COST_ELSE) for p in TUTORIALS),
                 lambda: _run([sys.executable, str(Path(__file__).resolve().parent / "_tutorials_run.py"),
                               str(folder), *map(str, TUTORIALS)], env=tutorial_env(), cwd=ROOT))

    def result(self):
        """name -> Run (a tutorial that did not run: returncode None, and why in stderr)."""
        whole = self.run("tutorials")
        runs = {}
        for p in TUTORIALS:
            status, out, err = (self.folder / f"{p.name}.{part}" for part in ("status", "stdout", "stderr"))
            if status.exists():
                runs[p.name] = Run(int(status.read_text()), out.read_text(), err.read_text())
            else:
                runs[p.name] = Run(None, whole.stdout, f"{p.name} did not run: {whole.stderr}")
        return runs


def wheel_figures(tmp):
    """Build the wheel from a copy of the sources, install it into a fresh virtual environment
    that sees numpy and matplotlib but not this checkout, and run ``python -m mlp_ref figures``
    there from an empty folder (``_wheel_figures.py``): every figure, so that it is also a
    second run of each. Returns ((folder of PNGs, stdout, the mlp_ref it imported, its console
    script), name -> each of ``FIGURE_DATA`` as the command computed it).

    One pip command builds the wheel (setuptools' PEP 517 hook, without build isolation: no
    download) and installs it, as ``pip wheel`` and then ``pip install`` of the wheel would,
    for the CPU of one pip start less; it byte-compiles nothing (the one run that follows
    compiles what it imports)."""
    src, venv, cwd, out = (tmp / name for name in ("src", "venv", "cwd", "out"))
    src.mkdir()
    for name in ("setup.cfg", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "mlp_ref", src / "mlp_ref", ignore=shutil.ignore_patterns("__pycache__"))
    env = kept_memory({k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    # one BLAS thread, as this test process computes (conftest.py): the figures compared bit for
    # bit with the wheel's are drawn at round-off level, which depends on the thread count
    env.update(MPLBACKEND="Agg", PIP_DISABLE_PIP_VERSION_CHECK="1", OPENBLAS_NUM_THREADS="1",
               OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")

    def run(*cmd, **kw):
        return _checked(list(cmd), env=env, **kw)

    run(sys.executable, "-m", "venv", "--without-pip", str(venv))
    python = str(venv / "bin" / "python")
    site = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    run(sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
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
    data = tmp / "measurements.pickle"
    res = run(python, "-I", str(Path(__file__).resolve().parent / "_wheel_figures.py"), str(out),
              str(data), *FIGURE_DATA, cwd=cwd)
    with open(data, "rb") as fh:
        got = pickle.load(fh)
    return (out, res.stdout, got["where"], str(got["script"])), got["measurements"]


class _Wheel(_Job):
    """The command ``figures`` from an installed wheel (``wheel_figures``).
    ``result()``: {"result": (folder of PNGs, stdout, the mlp_ref it imported, its console
    script), "measurements": name -> measurement} or {"error": what failed}."""

    def __init__(self, folder, files):
        super().__init__()
        self.add("wheel", 20, lambda: wheel_figures(folder))

    def result(self):
        got = self.wait()["wheel"]
        if "error" in got:
            return got
        run, measurements = got["result"]
        return {"result": run, "measurements": measurements}


#: The measurements of ``mlp_ref.figures`` that tests read (``figure_data``), each a function of
#: that module computed once per process and drawn by the figures of its ``draws``.
FIGURE_DATA = ("seed_weight_changes", "tangent_kernels", "drift_results", "visible_trajectories",
               "heldout_slice", "adam_orders", "continual_run")
_figure_data = {}


def figure_data(name):
    """``mlp_ref.figures.<name>()``, one of FIGURE_DATA. When this session runs the wheel's
    figures (the whole suite, or test_figures.py), the very measurement they were drawn from
    there, in another process: the tests check the numbers the figures show, and no process
    computes them twice. Otherwise computed here, as the figures command computes it: the same
    code, with one BLAS thread in both, gives the same bits. Read-only either way, as
    ``figures.measured`` hands out every measurement (the wheel's, too, passes through it).

    Waits for the wheel: the tests that use it run late (conftest.py, READ_THE_BACKGROUND)."""
    from mlp_ref import figures   # here: _tutorials_run.py's tutorials see mlp_ref alone

    if name not in FIGURE_DATA:
        raise ValueError(f"name: expected one of {FIGURE_DATA}, got {name!r}")
    if "wheel" not in _started:
        return getattr(figures, name)()
    if name not in _figure_data:
        wheel = result("wheel")
        if "error" in wheel:
            raise RuntimeError(f"the wheel's figures, and with them the measurements they drew, "
                               f"failed: {wheel['error']}")
        measurement = wheel["measurements"][name]
        _figure_data[name] = figures.measured(lambda: measurement)()
    return _figure_data[name]


#: ``python -m mlp_ref bench`` on sizes so tiny that only the machinery is measured
TINY_BENCH = ["bench", "--sizes", "5,4,3", "--batch", "8", "--repeats", "2", "--dense-repeats", "1",
              "--memory-rows", "4,8", "--dtype", "float64"]


class _Bench(_Job):
    """The bench command end to end (``TINY_BENCH --json``), in a process of its own, with one
    BLAS thread: on sizes this tiny, idle OpenBLAS threads spinning beside the suite's other
    processes would cost more than the whole bench. Its own child processes, one per group of
    measurements, make it slow to start and light to run.
    ``result()``: (Run, the JSON path)."""

    def __init__(self, folder, files):
        super().__init__()
        self.path = folder / "bench.json"
        self.add("bench", 3, lambda: _run([sys.executable, "-m", "mlp_ref", *TINY_BENCH, "--json",
                                           str(self.path)], env=tutorial_env(keep_memory=False), cwd=folder))

    def result(self):
        return self.run("bench"), self.path


class _Notebooks(_Job):
    """Every tutorial converted by jupytext and executed by nbclient in a real Jupyter kernel;
    tutorial 07 with the frameworks hidden.

    Each of ``KERNELS`` tasks starts a kernel and takes notebooks from one list, the longest
    first, with ``RESET`` (``%reset -f``) between two notebooks: every name a notebook uses must
    come from its own cells, as in a fresh kernel, while the modules already imported stay
    loaded (starting a kernel costs about 2.5 s of CPU, more than most tutorials themselves). A
    task that finds the list empty starts no kernel.

    ``result()``: {"notebooks": name -> executed notebook} or {"error": ...}; {"missing": the
    module} when the [notebooks] extra is not installed (the test then skips or fails, _extras)."""

    #: The [notebooks] extra, imported here, in the test process's own thread. IPython among
    #: them: jupyter_client imports it on first starting a kernel (for its kernel folders), and
    #: in a worker thread that import would leave a half-made IPython in sys.modules while a test
    #: draws a figure, whose canvas reads IPython.version_info from there (an AttributeError
    #: seen in CI).
    EXTRA = ("jupytext", "nbclient", "ipykernel", "nbformat", "IPython")
    KERNELS = 2
    #: The kernels keep no history: the suite writes nothing into the user's ~/.ipython.
    KERNEL_ARGUMENTS = ["--HistoryManager.enabled=False"]

    def __init__(self, folder, files):
        super().__init__()
        try:
            for module in self.EXTRA:
                __import__(module)
        except ImportError:
            self.missing = module
            return
        self.missing = None
        self.converted, self.queue, self.lock = None, None, threading.Lock()
        for lane in range(self.KERNELS):
            self.add(lane, 10, self._lane, shares=True)

    def _notebooks(self):
        """The converted notebooks and the list of names to run, made by the first task."""
        import jupytext
        import nbformat

        with self.lock:
            if self.converted is None:
                converted = {p.name: jupytext.read(p) for p in NOTEBOOKS}
                converted[FRAMEWORKS_TUTORIAL].cells.insert(0, nbformat.v4.new_code_cell(HIDE_FRAMEWORKS))
                self.queue = sorted(converted, key=lambda n: -TUTORIAL_COST.get(n, TUTORIAL_COST_ELSE))
                self.converted = converted
        return self.converted

    def _next(self):
        with self.lock:
            return self.queue.pop(0) if self.queue else None

    def _lane(self):
        import nbclient
        import nbformat
        from jupyter_client.manager import AsyncKernelManager

        converted = self._notebooks()
        reset = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(RESET)])

        def client(nb, km):
            return nbclient.NotebookClient(nb, km=km, timeout=300, kernel_name="python3",
                                           resources={"metadata": {"path": str(ROOT)}})

        async def lane():
            name = self._next()
            if name is None:
                return
            km = AsyncKernelManager(kernel_name="python3")
            await km.start_kernel(env=tutorial_env(), cwd=str(ROOT), extra_arguments=self.KERNEL_ARGUMENTS)
            lower_priority(km.provisioner.pid)
            try:
                first = True
                while name is not None:
                    if not first:
                        await client(reset, km).async_execute()
                    first = False
                    await client(converted[name], km).async_execute()
                    name = self._next()
            finally:
                await km.shutdown_kernel(now=True)

        asyncio.run(lane())

    def result(self):
        if self.missing:
            return {"missing": self.missing}
        errors = [got["error"] for got in self.wait().values() if "error" in got]
        if errors:
            return {"error": errors[0]}
        hide = self.converted[FRAMEWORKS_TUTORIAL].cells.pop(0)
        assert hide.source == HIDE_FRAMEWORKS and not hide.outputs, hide
        return {"notebooks": self.converted}


#: job -> (how to start it, the test files that read it)
_JOBS = {"tutorials": (_Tutorials, {"test_tutorials.py"}),
         "wheel": (_Wheel, {"test_figures.py"}),
         "notebooks": (_Notebooks, {"test_notebooks.py"}),
         "bench": (_Bench, {"test_bench.py"})}

_started = {}
_folders = []
_results = {}


def start(test_files):
    """Put on the queue the jobs that the collected test files (their names) read."""
    for name, (job, files) in _JOBS.items():
        if files & set(test_files):
            _start(name, set(test_files))
    _QUEUE.go()


def every_test_file():
    """The names of the test files that read a job."""
    return set().union(*(files for _, files in _JOBS.values()))


def _start(name, test_files):
    if name not in _started:
        folder = Path(tempfile.mkdtemp(prefix=f"mlp-ref-{name}-"))
        _folders.append(folder)
        _started[name] = _JOBS[name][0](folder, test_files)


def result(name):
    """The result of a job (started now if it was not: a test run on its own). If it is not
    done, the test process waits for it, and from then on the background gets its core too
    (``_Queue.widen``); a job done already widens nothing: the tests that read it go on."""
    if name not in _results:
        _start(name, _JOBS[name][1])
        if not _started[name].done():
            _QUEUE.widen()
        _results[name] = _started[name].result()
    return _results[name]


def stop():
    """Nothing more starts; what runs is killed; the folders go."""
    _QUEUE.clear()
    for proc in list(_QUEUE.running):
        if proc.poll() is None:
            proc.kill()
    for folder in _folders:
        shutil.rmtree(folder, ignore_errors=True)
