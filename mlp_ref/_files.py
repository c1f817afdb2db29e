"""Writing a file whole or not at all: the one helper every writer of the package uses
(``MLP.save``, the figures, the bench JSON).

The bytes go to a temporary file in the target's folder (same file system, so the final
``os.replace`` is one atomic rename), are flushed to disk, and only then take the target's name.
A reader therefore sees the old file or the new one, never a torn one. The temporary file is
removed on every exit Python sees: an exception, Ctrl-C (KeyboardInterrupt) and SIGTERM, which
is turned into ``SystemExit`` while a write is under way so that the ``finally`` runs. A SIGKILL
or a power cut leaves the temporary file behind; its name carries the writer's process id, and
the next write of the same target removes those whose process is gone.
"""
from __future__ import annotations

import contextlib
import os
import signal
import threading
import uuid

from . import _checks

_SUFFIX = ".tmp"


def _temp_prefix(path):
    return f".{os.path.basename(path)}."


def temp_files(path):
    """The temporary files of writes of ``path`` still in its folder (their full paths)."""
    folder, prefix = os.path.dirname(os.path.abspath(path)), _temp_prefix(path)
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return [os.path.join(folder, n) for n in sorted(names)
            if n.startswith(prefix) and n.endswith(_SUFFIX) and _owner(n[len(prefix):]) is not None]


def _owner(middle):
    """The process id in ``PID.HEX.tmp`` (None if the name is not one of ours)."""
    pid, _, rest = middle.partition(".")
    return int(pid) if pid.isdigit() and len(rest) == 32 + len(_SUFFIX) else None


def _alive(pid):
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True                      # exists (another user's), or we cannot tell: keep it
    return True


def _remove_stale(path):
    """Remove temporary files of ``path`` left by writers that died (SIGKILL, power cut)."""
    prefix = _temp_prefix(path)
    for tmp in temp_files(path):
        if not _alive(_owner(os.path.basename(tmp)[len(prefix):])):
            with contextlib.suppress(OSError):
                os.remove(tmp)


def check_target(name, path):
    """``path`` as str, with a folder that exists and can be written, and not itself a folder.

    Raises the matching OSError (FileNotFoundError, NotADirectoryError, IsADirectoryError,
    PermissionError) whose message starts with ``name``: checked before any work is done.
    """
    path = _checks.path(name, path)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.exists(folder):
        parent = folder
        while parent and not os.path.exists(parent):
            parent = os.path.dirname(parent)
        if parent and not os.path.isdir(parent):
            raise NotADirectoryError(f"{name}: {parent!r} in {path!r} is a file, "
                                                    f"not a folder")
        raise FileNotFoundError(f"{name}: folder {folder!r} does not exist")
    if not os.path.isdir(folder):
        raise NotADirectoryError(f"{name}: {folder!r} in {path!r} is a file, "
                                                f"not a folder")
    if os.path.isdir(path):
        raise IsADirectoryError(f"{name}: {path!r} is a folder; expected a file name")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PermissionError(f"{name}: folder {folder!r} is not writable")
    return path


@contextlib.contextmanager
def _sigterm_raises():
    """While the block runs, SIGTERM raises SystemExit (exit status 143) instead of killing
    the process outright, so that ``finally`` clauses remove what they must. Only the main
    thread can set a handler, and only a default handler is replaced (a program's own wins)."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL):
        yield
        return

    def handler(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def write_atomically(name, path, write):
    """Call ``write(f)`` on a binary file object, then give its bytes the name ``path``.

    ``name`` is the argument's name in messages (``path``, ``--json``, ``--out``). On any
    failure or interruption the temporary file is removed and ``path`` is left as it was.
    Returns ``path`` as str.
    """
    path = check_target(name, path)
    _remove_stale(path)
    folder = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(folder, f"{_temp_prefix(path)}{os.getpid()}.{uuid.uuid4().hex}{_SUFFIX}")
    with _sigterm_raises():
        try:
            # os.open with mode 0o666 lets the umask decide the permissions, as open() would
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
        except OSError as exc:
            raise type(exc)(f"{name}: cannot write into folder {folder!r} "
                                       f"({exc.strerror})") from None
        try:
            with os.fdopen(fd, "wb") as f:
                write(f)
                f.flush()
                os.fsync(f.fileno())     # the bytes are on disk before the name points at them
            try:
                os.replace(tmp, path)
            except OSError as exc:
                raise type(exc)(f"{name}: cannot write {path!r} ({exc.strerror})") from None
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.remove(tmp)
    return path


def write_results(path, text):
    """A command's results as the text file ``path`` (``--json``), written whole or not at
    all, before the command prints its table: a reader of that table who goes away then loses
    nothing. Returns None, or the line to print after the table when the file could not be
    written (a disk that filled up during a long run, say): the table is then the result."""
    try:
        write_atomically("--json", path, lambda f: f.write(text.encode("utf-8")))
    except OSError as exc:
        return f"--json: could not write {path!r} ({exc.strerror or exc}); the results are the table above"
    return None
