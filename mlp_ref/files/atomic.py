"""Writing a file whole or not at all: the one helper every writer of the package uses
(``MLP.save``, the figures, the bench JSON).

The bytes go to a temporary file in the target's folder (same file system, so the final
``os.replace`` is one atomic rename), are flushed to disk, and only then take the target's name.
A reader therefore sees the old file or the new one, never a torn one. The temporary file is
removed on every exit Python sees: an exception, Ctrl-C (KeyboardInterrupt) and SIGTERM, which
is turned into ``SystemExit`` while a write is under way so that the ``finally`` runs.

A SIGKILL or a power cut leaves the temporary file behind. So every write first removes the
temporary files in its folder whose writer has gone, whatever target they were for (a killed
``figures`` run is cleaned up by the next run of any figure). Whether a writer has gone is told
by a lock, not by a process id: the writer holds ``fcntl.flock`` on its temporary file from
creating it until the file has its final name, and the kernel drops that lock when the writer
dies, however it dies. A file whose lock can be taken is therefore stale. A process id would
not do: writers in two containers sharing a folder live in different PID namespaces, where the
same number is another process or none, and each would remove the other's live file. (Where
there is no ``fcntl``, on Windows, a file that its writer holds open cannot be removed at all;
trying to remove it is the same test.) The name still carries the writer's process id, for a
person who finds such a file; nothing here decides by it.

A write that fails part way (a full disk, a quota, an I/O error) raises ``WriteError``, an
OSError with the system's errno whose message starts with the caller's argument name.

What a target may be is decided once, by ``check_target``, before any work: a new file or a
regular file is replaced as above; a symlink is followed, and the file it points at is replaced
(the link stays, pointing at the new file); a character device (``/dev/null``) is written in
place, never replaced; a FIFO, a socket, a block device or a folder is refused, as is a name
longer than its file system's NAME_MAX. Renaming over a FIFO or a device would put a regular
file in its place, and as root that could be the system's own ``/dev/null``.
"""
from __future__ import annotations

import contextlib
import errno
import os
import re
import signal
import stat
import threading
import uuid

from ..boundary import checks

try:
    import fcntl
except ImportError:                      # Windows: see the module's docstring
    fcntl = None

_SUFFIX = ".tmp"
#: a temporary file of ours is named ".TARGET." + this (PID, then a uuid4's 32 hex digits)
_TEMP_TAIL = re.compile(r"[0-9]+\.[0-9a-f]{32}\.tmp")
_TEMP_NAME = re.compile(r"\..+\." + _TEMP_TAIL.pattern)


class WriteError(OSError):
    """A write that failed after its target was checked (a full disk, a quota, an I/O error).

    An OSError, not a ValueError: the argument was right and the machine failed, so code that
    handles OSError for files keeps handling it. ``errno`` and ``strerror`` are the system's;
    ``argument`` is the name the message starts with (``path``, ``out``, ``--json``).
    """

    def __str__(self):             # the message, not OSError's "[Errno 28] No space left ..."
        return self.args[0]


#: the errors that writing bytes into a file can meet, and what each says; an OSError that
#: ``write`` raises with another errno (a font file missing, say) is the writer's own, not the disk's
_WRITE_REASONS = {errno.ENOSPC: "the disk is full", getattr(errno, "EDQUOT", -1): "the disk quota is exceeded",
                  errno.EFBIG: "the file is too large for this file system",
                  errno.EIO: "the write failed (an I/O error)", errno.EROFS: "the file system is read-only"}


def _write_error(name, what, exc, target=None):
    """The WriteError "``name``: cannot ``what``: the disk is full (strerror)" for ``exc``,
    saying that ``target`` (if given) was left as it was."""
    reason = _WRITE_REASONS.get(exc.errno, "the write failed")
    message = f"{name}: cannot {what}: {reason} ({exc.strerror or exc})"
    if target is not None:
        message += f"; {target!r} is as it was, and nothing half-written is left"
    error = WriteError(message)
    error.errno, error.strerror, error.argument = exc.errno, exc.strerror, name
    return error


def refused(error_type, name, message):
    """``error_type("name: message")`` (an OSError) carrying ``name`` as ``argument``: a target
    refused before anything is written."""
    error = error_type(f"{name}: {message}")
    error.argument = name
    return error


def make_folder(name, folder):
    """``os.makedirs(folder, exist_ok=True)``, failing with a message that starts with ``name``:
    a full disk (any errno of ``_WRITE_REASONS``) as WriteError, anything else (a parent that
    cannot be made, no permission) as the OSError that came."""
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        if exc.errno in _WRITE_REASONS:
            raise _write_error(name, f"make the folder {folder!r}", exc) from None
        raise refused(type(exc), name, f"cannot make the folder {folder!r} ({exc.strerror})") from None


#: bytes of a temporary name besides its target's: the dots, a process id of up to 10 digits,
#: the uuid's 32 digits and the suffix
_TEMP_EXTRA = 1 + 1 + 10 + 1 + 32 + len(_SUFFIX)


def _temp_prefix(path):
    """".TARGET.", with TARGET cut (in bytes) so that the temporary name fits in NAME_MAX: a target
    whose own name is near the limit is written, not refused when its temporary is made."""
    base = os.fsencode(os.path.basename(path))
    keep = max(1, (_name_max(os.path.dirname(os.path.abspath(path))) or 255) - _TEMP_EXTRA)
    return f".{os.fsdecode(base[:keep])}."


def _name_max(folder):
    """The file system's longest name in bytes (NAME_MAX) for ``folder``, or None if it does
    not say."""
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (AttributeError, OSError, ValueError):     # no pathconf (Windows), no such folder
        return None


def temp_files(path):
    """The temporary files of writes of ``path`` still in its folder (their full paths)."""
    prefix = _temp_prefix(path)
    return [tmp for tmp in _temp_files_in(os.path.dirname(os.path.abspath(path)))
            if os.path.basename(tmp).startswith(prefix)
            and _TEMP_TAIL.fullmatch(os.path.basename(tmp)[len(prefix):])]


def _temp_files_in(folder):
    """The temporary files of writes of any target in ``folder`` (their full paths)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return [os.path.join(folder, n) for n in sorted(names) if _TEMP_NAME.fullmatch(n)]


def _remove_if_stale(tmp):
    """Remove the temporary file ``tmp`` if its writer has gone: if its lock can be taken.

    The lock is held while the file is removed: a writer that created ``tmp`` an instant ago
    and waits for its own lock then finds the name gone, and starts again (``_create``). A
    writer renames its file before it lets go of the lock, so a lock taken after that finds no
    ``tmp`` to remove.
    """
    if fcntl is None:
        with contextlib.suppress(OSError):    # refused while its writer holds it open
            os.remove(tmp)
        return
    try:   # O_NONBLOCK: a FIFO given our kind of name does not block; O_NOFOLLOW: no symlink
        fd = os.open(tmp, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return                               # gone already, or not ours to read: keep it
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)   # BlockingIOError while its writer lives
        os.remove(tmp)
    except OSError:
        pass                                 # live, or removed meanwhile: nothing to do
    finally:
        os.close(fd)


def _create(name, path):
    """A new temporary file for ``path`` in its folder, open for writing and locked
    (``fcntl.flock``, exclusive) until its descriptor is closed. Returns (its path, the fd)."""
    folder = os.path.dirname(os.path.abspath(path))
    while True:
        tmp = os.path.join(folder, f"{_temp_prefix(path)}{os.getpid()}.{uuid.uuid4().hex}{_SUFFIX}")
        try:
            # os.open with mode 0o666 lets the umask decide the permissions, as open() would
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
        except OSError as exc:
            raise _write_error(name, f"write {path!r}", exc, target=path) from None
        if fcntl is None:
            return tmp, fd
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:    # a file system without locks: no cleanup can take the file for stale
            return tmp, fd
        try:
            if os.path.samestat(os.fstat(fd), os.stat(tmp)):
                return tmp, fd
        except FileNotFoundError:
            pass
        # another writer's cleanup took the lock between our open and our flock, and removed
        # the file as stale: nothing was written yet, so write under a new name
        os.close(fd)


def check_target(name, path):
    """``path`` as str, checked before any work is done: see ``target``."""
    path = checks.check_path(name, path)
    target(name, path)
    return path


#: what stat says a file is, for the kinds a writer refuses
_REFUSED_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
                  (stat.S_ISBLK, "a block device"))


def target(name, path):
    """(the file to write, whether it is written in place) for the target ``path`` (a str).

    The file is ``path`` with its symlinks followed, replaced by a new file (``write_atomically``),
    or a character device, written in place (``/dev/null``: it stays the device). Refused, with
    an OSError whose message starts with ``name`` and whose ``argument`` is ``name``:

    * a folder that does not exist (FileNotFoundError), or a file where a folder should be
      (NotADirectoryError); a name longer than the file system's NAME_MAX (OSError, ENAMETOOLONG);
    * a folder (IsADirectoryError); a FIFO, a socket or a block device, or a symlink to one, or a
      symlink that loops (OSError);
    * a folder that cannot be written, a read-only file, another user's file in a sticky folder
      such as /tmp (PermissionError).
    """
    absolute = os.path.abspath(path)
    existing = _deepest_existing(absolute)
    if existing != absolute:                    # a new file, perhaps in new folders
        if not os.path.isdir(existing):
            raise refused(NotADirectoryError, name, f"{existing!r} in {path!r} is {_not_a_folder(existing)}")
        _check_new_names(name, existing, absolute)
        folder = os.path.dirname(absolute)
        if not os.path.isdir(folder):
            raise refused(FileNotFoundError, name, f"folder {folder!r} does not exist")
        _check_writable_folder(name, folder)
        return absolute, False
    try:
        info = os.stat(absolute)                # through every symlink
    except FileNotFoundError:                   # a symlink to a name that does not exist yet
        where = os.path.realpath(absolute)
        if os.path.lexists(where):              # (a guard: the call below must not recurse again)
            raise refused(OSError, name, f"{path!r} is a symlink that cannot be followed") from None
        try:
            return target(name, where)[0], False
        except OSError as exc:              # say which name the user gave
            reason = str(exc)[len(name) + 2:]
            raise refused(type(exc), name, f"{path!r} is a symlink to {where!r}; {reason}") from None
    except OSError as exc:                      # a loop (ELOOP), a folder we may not search
        what = "is a symlink that loops" if exc.errno == errno.ELOOP else "cannot be looked at"
        raise refused(type(exc), name, f"{path!r} {what} ({exc.strerror})") from None
    through = f" (the symlink's target {os.path.realpath(absolute)!r})" if os.path.islink(absolute) else ""
    if stat.S_ISDIR(info.st_mode):
        raise refused(IsADirectoryError, name, f"{path!r}{through} is a folder; expected a file name")
    if stat.S_ISCHR(info.st_mode):              # /dev/null, /dev/tty: written in place
        if not os.access(absolute, os.W_OK):
            raise refused(PermissionError, name, f"{path!r}{through} is a device this user cannot write")
        return absolute, True
    for is_kind, kind in _REFUSED_KINDS:
        if is_kind(info.st_mode):
            raise refused(OSError, name, f"{path!r}{through} is {kind}, not a regular file; "
                                         "it is not replaced (name a file)")
    where = os.path.realpath(absolute)
    folder = os.path.dirname(where)
    _check_writable_folder(name, folder)
    if not os.access(where, os.W_OK):
        raise refused(PermissionError, name, f"{path!r}{through} is read-only")
    folder_info, euid = os.stat(folder), getattr(os, "geteuid", lambda: 0)()
    if (folder_info.st_mode & stat.S_ISVTX and euid != 0
            and euid not in (info.st_uid, folder_info.st_uid)):
        raise refused(PermissionError, name, f"{path!r}{through} is another user's file in the "
                                             f"sticky folder {folder!r}, which only they may replace")
    return where, False


def _not_a_folder(path):
    """What ``path``, which exists and is not a folder, is instead: "a file, not a folder"."""
    return "a file, not a folder" if os.path.isfile(path) else "not a folder"


def _deepest_existing(absolute):
    """The longest leading part of the absolute path ``absolute`` that exists (a dangling
    symlink exists; a name too long for its file system does not)."""
    existing = absolute
    while not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    return existing


def _check_new_names(name, existing, absolute):
    """Refuse a name to be made below the folder ``existing`` that is longer than its file
    system's NAME_MAX (the system would refuse it only when the file is written, after the work)."""
    limit = _name_max(existing)
    if limit is None:
        return
    for part in os.path.relpath(absolute, existing).split(os.sep):
        size = len(os.fsencode(part))
        if size > limit:
            short = part if len(part) <= 40 else part[:20] + "..." + part[-16:]
            error = refused(OSError, name, f"the name {short!r} is {size} bytes long, more than the "
                                           f"{limit} that the file system of {existing!r} allows")
            error.errno = errno.ENAMETOOLONG
            raise error


def _check_writable_folder(name, folder):
    if not os.access(folder, os.W_OK | os.X_OK):
        raise refused(PermissionError, name, f"folder {folder!r} is not writable")


def check_folder(name, folder):
    """``folder`` as str, a folder that is there or can be made (``make_folder``) and written,
    checked before any work: refused as ``target`` refuses, with ``name`` in front."""
    folder = checks.check_path(name, folder)
    absolute = os.path.abspath(folder)
    existing = _deepest_existing(absolute)
    if not os.path.isdir(existing):
        where = folder if existing == absolute else existing
        raise refused(NotADirectoryError, name, f"{where!r} is {_not_a_folder(existing)}")
    if existing != absolute:
        _check_new_names(name, existing, absolute)
        if not os.access(existing, os.W_OK | os.X_OK):
            raise refused(PermissionError, name, f"cannot make the folder {folder!r}: "
                                                 f"{existing!r} is not writable")
    else:
        _check_writable_folder(name, folder)
    return folder


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

    ``name`` is the argument's name in messages (``path``, ``--json``, ``--out``). The target is
    checked first (``target``): refused, or followed through its symlinks, or a character device
    written in place. On any failure or interruption the temporary file is removed and ``path``
    is left as it was; a failure of the write itself (a full disk) raises ``WriteError`` naming
    ``name`` and ``path``. Returns ``path`` as str.
    """
    path = checks.check_path(name, path)
    where, in_place = target(name, path)
    if in_place:
        return _write_device(name, path, where, write)
    for tmp in _temp_files_in(os.path.dirname(where)):
        _remove_if_stale(tmp)
    with _sigterm_raises():
        tmp, fd = _create(name, where)
        # the lock lives as long as any descriptor of the file: this copy keeps it from the
        # file's close until it has its final name (with no fcntl there is no lock to keep)
        lock = os.dup(fd) if fcntl is not None else None
        try:
            try:
                with os.fdopen(fd, "wb") as f:
                    write(f)
                    f.flush()
                    os.fsync(f.fileno())     # the bytes are on disk before the name points at them
            except OSError as exc:
                if exc.errno not in _WRITE_REASONS:
                    raise
                raise _write_error(name, f"write {path!r}", exc, target=path) from None
            _still_replaceable(name, path, where)
            try:
                os.replace(tmp, where)
            except OSError as exc:
                raise _write_error(name, f"write {path!r}", exc, target=path) from None
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.remove(tmp)               # (gone already when it has its final name)
            if lock is not None:
                os.close(lock)
    return path


def _still_replaceable(name, path, where):
    """Refuse, just before the rename, a ``where`` that became something other than a regular
    file while the bytes were written (a FIFO or a device made in its place meanwhile)."""
    try:
        mode = os.lstat(where).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode):
        raise refused(OSError, name, f"{path!r} stopped being a regular file while it was written; "
                                     "it is not replaced")


def _write_device(name, path, where, write):
    """Write into the character device ``where`` in place: opened without O_CREAT, so that if it
    went away meanwhile no regular file takes its name."""
    flags = os.O_WRONLY | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
    try:
        with os.fdopen(os.open(where, flags), "wb") as f:
            write(f)
            f.flush()
    except OSError as exc:
        if exc.errno not in _WRITE_REASONS:
            raise
        raise _write_error(name, f"write {path!r}", exc) from None
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
