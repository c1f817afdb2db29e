"""Where a submission's child process runs: in a bubblewrap sandbox, as an unprivileged user, or
as it is, and what it can reach from there.

The child's import path is a *lesson view*: a folder holding a copy of the lesson's modules
(``mlp_ref/*.py``, ``boundary``, ``fast``, ``files``, ``resources``) and of the three modules the
child itself runs (``child``, ``wire``, ``hints``) and nothing else of the package: not the
reference answers (``answers``), not the grader, not the solutions, not the class folder. The
child is started with ``python -I -S`` (no current folder, no PYTHON* variables, no user site,
no ``.pth`` file run), its path set to the standard library, the view and NumPy.

Three isolations, the strongest that starts:

``bubblewrap``
    Linux with ``bwrap`` (Debian's ``bubblewrap``, the sandbox Flatpak uses) and user namespaces:
    the child has its own PID, network, IPC, UTS and mount namespaces, runs as uid 65534, sees a
    read-only view of Python's prefix (site-packages hidden), the lesson view with NumPy, the
    submission's own folder read-only without the other submissions in it, and a private
    tmpfs as its working folder and ``/tmp``. It dies with the grader (``--die-with-parent``),
    has a session of its own (``--new-session``), and every process it starts dies with it (the
    PID namespace ends with its first process).
``user``
    Where bubblewrap cannot start and the grader runs as root: the child runs as a uid of its
    own (``GRADER_UID``, no account, no file) in a session of its own; it cannot signal, trace or
    write anything of the grader's, and when its file is done every process of that uid is
    killed. Files that everyone may read (the solutions, the class folder) stay readable:
    only the child's audit hook keeps them out of reach.
``none``
    Neither: the child runs as the grader's user; the audit hook, the tripwires and the
    resource limits are all there is. The report says so.
"""
from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: The uid the child runs as where the grader is root and bubblewrap cannot start: one with no
#: account and no file, so that killing every process of it kills only what a child started.
_uid = os.environ.get("MLP_REF_GRADER_UID", "")
GRADER_UID = int(_uid) if _uid.isdigit() and 0 < int(_uid) < 2 ** 31 else 64321

#: Where the lesson view is mounted inside bubblewrap, and the child's working folder there.
VIEW_MOUNT, HOME_MOUNT = "/grader", "/home/student"

#: Size of each of the child's private tmpfs (bytes): a child fills it, not the machine's memory.
TMPFS_BYTES = 64 * 2 ** 20

_PACKAGE = Path(__file__).resolve().parents[2]                  # mlp_ref/
_LESSON_DIRS = ("boundary", "fast", "files", "resources")
_CHILD_MODULES = ("child.py", "wire.py", "hints.py")
_CHILD_MAIN = "from mlp_ref.classroom.grading.child import main; main()"


@dataclass(frozen=True)
class Isolation:
    """How a child runs: ``kind`` ("bubblewrap", "user", "none") and why, in a few words."""
    kind: str
    detail: str

    def __str__(self):
        return f"{self.kind} ({self.detail})" if self.detail else self.kind


# -- the lesson view ----------------------------------------------------------------------------
_view = None


def lesson_view():
    """The folder of the child's import path (built once per grader, removed at its exit): a
    copy of the lesson and of the child's modules, readable by everyone, writable by no child."""
    global _view
    if _view is not None and os.path.isdir(_view):
        return _view
    root = tempfile.mkdtemp(prefix="mlp_ref_view_")
    os.chmod(root, 0o755)
    target = Path(root, "mlp_ref")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    target.mkdir()
    for f in _PACKAGE.glob("*.py"):
        if f.name != "__main__.py":
            shutil.copy2(f, target / f.name)
    for d in _LESSON_DIRS:
        shutil.copytree(_PACKAGE / d, target / d, ignore=ignore)
    grading = target / "classroom" / "grading"
    grading.mkdir(parents=True)
    (target / "classroom" / "__init__.py").write_text('"""The child\'s view: only the grading child."""\n')
    (grading / "__init__.py").write_text('"""The child\'s modules; the grader stays outside."""\n')
    for name in _CHILD_MODULES:
        shutil.copy2(Path(__file__).with_name(name), grading / name)
    for path, dirs, files in os.walk(root):
        for name in dirs:
            os.chmod(os.path.join(path, name), 0o755)
        for name in files:
            os.chmod(os.path.join(path, name), 0o644)
    atexit.register(shutil.rmtree, root, True)
    _view = root
    return root


def _numpy_dirs():
    """NumPy's package folder and the folders beside it that its wheel's libraries live in."""
    package = Path(np.__file__).resolve().parent
    return [package] + [p for p in package.parent.glob("numpy*.libs") if p.is_dir()]


# -- choosing -----------------------------------------------------------------------------------
_chosen = {}


def choose(wanted=None):
    """The strongest isolation that starts here (probed once per grader): ``wanted`` (or the
    variable MLP_REF_SANDBOX) = "bubblewrap", "user" or "none" asks for one, and gets "none"
    with the reason where it cannot start."""
    wanted = wanted or os.environ.get("MLP_REF_SANDBOX") or "best"
    if wanted not in _chosen:
        _chosen[wanted] = _choose(wanted)
    return _chosen[wanted]


def _choose(wanted):
    if wanted not in ("best", "bubblewrap", "user", "none"):
        return Isolation("none", f"MLP_REF_SANDBOX={wanted!r} is not bubblewrap, user or none")
    if wanted == "none":
        return Isolation("none", "asked for: the child runs as the grader's user")
    reasons = []
    if wanted in ("best", "bubblewrap"):
        why = _probe_bwrap()
        if why is None:
            return Isolation("bubblewrap", "own PID, network and mount namespaces, read-only lesson")
        reasons.append(why)
    if wanted in ("best", "user"):
        why = _probe_user()
        if why is None:
            return Isolation("user", f"uid {GRADER_UID}, killed with every process it started")
        reasons.append(why)
    return Isolation("none", "; ".join(reasons) + ": the child runs as the grader's user, "
                             "grade files you do not trust in a container")


def _probe_bwrap():
    if not sys.platform.startswith("linux"):
        return f"bubblewrap is Linux's, not {sys.platform}'s"
    if shutil.which("bwrap") is None:
        return "bubblewrap is not installed (apt-get install bubblewrap)"
    try:
        probe = subprocess.run(bwrap_command(["true"], None, []), capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap does not start ({type(exc).__name__})"
    if probe.returncode != 0:
        said = " ".join(probe.stderr.decode(errors="replace").split())[:120]
        return f"bubblewrap does not start here ({said or 'exit status ' + str(probe.returncode)})"
    return None


def _probe_user():
    if not hasattr(os, "setuid"):
        return "no users to switch to on this OS"
    if os.geteuid() != 0:
        return "the grader is not root, so it cannot run the child as another user"
    try:
        probe = subprocess.run([sys.executable, "-I", "-S", "-c", "pass"], preexec_fn=_as_grader_uid,
                               capture_output=True, timeout=30, cwd="/")
    except (OSError, subprocess.SubprocessError):
        probe = None
    if probe is None or probe.returncode != 0:
        return (f"uid {GRADER_UID} cannot run {sys.executable} (a folder on its way that others "
                f"may not enter?)")
    return None


# -- starting and ending a child ----------------------------------------------------------------
def _as_grader_uid():
    os.setsid()
    os.setgroups([])
    os.setgid(GRADER_UID)
    os.setuid(GRADER_UID)


def bwrap_command(argv, folder, beside):
    """bwrap's arguments around ``argv``: ``folder`` the child's working folder (a private
    tmpfs when None), ``beside`` the files and folders it may read at their own paths."""
    args = ["bwrap", "--unshare-all", "--unshare-user", "--uid", "65534", "--gid", "65534",
            "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            # the private /tmp first: what is bound below it (a Python in a venv made by
            # mktemp, a submission's folder) must be bound after it, on top of it
            "--size", str(TMPFS_BYTES), "--tmpfs", "/tmp",
            "--ro-bind", "/usr", "/usr", "--proc", "/proc", "--dev", "/dev"]
    for name in ("bin", "lib", "lib64", "lib32", "sbin"):
        path = Path("/", name)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    for name in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime"):
        args += ["--ro-bind-try", name, name]
    prefixes = {os.path.realpath(p) for p in (sys.base_prefix, sys.prefix,
                                               os.path.dirname(os.path.realpath(sys.executable)))}
    for prefix in sorted(prefixes):
        if not prefix.startswith("/usr/") and prefix != "/usr":
            args += ["--ro-bind", prefix, prefix]
    for key in ("purelib", "platlib"):            # site-packages: hidden, NumPy comes by the view
        site = os.path.realpath(sysconfig.get_paths()[key])
        if os.path.isdir(site):
            args += ["--tmpfs", site, "--remount-ro", site]
    args += ["--size", str(TMPFS_BYTES), "--tmpfs", HOME_MOUNT]
    if _view is not None:
        args += ["--ro-bind", _view, f"{VIEW_MOUNT}/view"]
        for path in _numpy_dirs():
            args += ["--ro-bind", str(path), f"{VIEW_MOUNT}/site/{path.name}"]
    for path in beside:
        args += ["--ro-bind", str(path), str(path)]
    args += ["--chdir", HOME_MOUNT, "--"]
    return args + list(argv)


def child_argv(isolation, fds):
    """The command that runs the child, its import path set by its first line."""
    if isolation.kind == "bubblewrap":
        path = [f"{VIEW_MOUNT}/view", f"{VIEW_MOUNT}/site"]
    else:
        path = [lesson_view()] + sorted({str(p.parent) for p in _numpy_dirs()})
    start = f"import sys; sys.path[:0] = {path!r}; {_CHILD_MAIN}"
    return [sys.executable, "-I", "-S", "-B", "-c", start, *map(str, fds)]


def start(isolation, fds, beside, env, folder):
    """Popen of the child under ``isolation``: ``fds`` its two pipe ends (passed on), ``beside``
    what it may read of the submission's folder, ``folder`` its working folder outside a sandbox."""
    lesson_view()
    argv = child_argv(isolation, fds)
    common = dict(pass_fds=tuple(fds), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                  stderr=None if os.environ.get("MLP_REF_CHILD_STDERR") else subprocess.DEVNULL, env=env)
    if isolation.kind == "bubblewrap":
        return subprocess.Popen(bwrap_command(argv, None, beside), cwd="/", start_new_session=True,
                                **common)
    if isolation.kind == "user":
        os.chown(folder, GRADER_UID, GRADER_UID)
        return subprocess.Popen(argv, cwd=folder, preexec_fn=_as_grader_uid, **common)
    return subprocess.Popen(argv, cwd=folder, start_new_session=True, **common)


#: Seconds a child whose pipes are closed has to end by itself (its CPU time is then counted
#: among the grader's children's) before it is killed.
GRACE = 0.2


def end(isolation, proc):
    """Kill the child and every process it started (after GRACE seconds to end by itself); its
    exit status, or None if it would not end. bubblewrap: its PID namespace ends with its first
    process; user: every process of GRADER_UID is killed; none: its session."""
    try:
        proc.wait(timeout=GRACE)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if isolation.kind == "user":
        kill_uid(GRADER_UID)
    try:
        return proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        return None


def kill_uid(uid):
    """SIGKILL every process of ``uid`` (a helper that becomes ``uid`` and signals everyone it
    may: kill(-1)), again until none is left (a fork between two rounds is caught by the next)."""
    for _ in range(20):
        pid = os.fork()
        if pid == 0:                              # pragma: no cover - the helper
            try:
                os.setgid(uid)
                os.setuid(uid)
                os.kill(-1, signal.SIGKILL)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        if not processes_of(uid) and os.path.isdir("/proc"):
            return
        time.sleep(0.01)


def processes_of(uid):
    """The pids of the running processes of ``uid`` (from /proc, where there is one: elsewhere
    none are seen, and kill_uid signals its rounds all the same), zombies excluded."""
    pids = []
    for entry in (os.listdir("/proc") if os.path.isdir("/proc") else []):
        if not entry.isdigit():
            continue
        try:
            status = Path("/proc", entry, "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if fields.get("Uid", "").split()[:1] == [str(uid)] and not fields.get("State", "").strip().startswith("Z"):
            pids.append(int(entry))
    return pids
