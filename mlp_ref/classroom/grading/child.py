"""The child process that runs one submission: ``python -m mlp_ref.classroom.grading.child IN OUT``.

The grader (``runner``) starts it in the sandbox ``sandbox`` chooses (bubblewrap, a uid of its
own, or neither, said so), with ``python -I -S`` and an import path that holds the lesson, these
modules and NumPy, nothing else; it talks to it over two pipes (file descriptors IN and OUT),
never over standard output, which the student's prints may fill or close. It

1. reads the load request, then limits itself (CPU seconds, address space, file size);
2. installs its guard, an audit hook: the solutions and the other submissions out of reach, the
   package's code unreadable, and, once the student's file may run, no walk of the heap, no
   new function or code object, no native code, no process, no signal (``REFUSED``); and
   replaces every public function of mlp_ref that the exercise does not allow with a
   *tripwire*: called from the student's code it records its name and raises, called from
   mlp_ref's own code (a frame whose code object is the package's, by identity) it does what it
   always did (a network's ``gradient`` still runs its ``backward``); the originals are held by
   the guard alone, which no object the student can reach refers to;
3. runs the student's file as a module and answers each call request with the function's
   result and its arguments afterwards, as plain data (``wire``), or with what it raised.

It computes no reference answer: those stay in the grader's process. Inside one process a
determined student can still reach what the Python code of this process holds (a frame of a
tripwire on the stack while the package calls back into the student's code); what must stay
secret, the reference and the solutions, is not in the process, nor, under bubblewrap, on its
file system.
"""
from __future__ import annotations

import functools
import linecache
import os
import sys
import traceback
import types

import numpy as np

try:
    import resource
except ImportError:                               # no resource limits on this OS (Windows)
    resource = None

import mlp_ref
from mlp_ref import fixes, jacobian, losses, network  # noqa: F401 - imported before any limit

from . import hints, wire

PACKAGE_DIR = os.path.dirname(os.path.abspath(mlp_ref.__file__)) + os.sep
TRIPPED = []                 # the package functions the student's code called, in order
CALLED = set()               # the exercise's own functions called during the current request


class UsedPackage(BaseException):
    """Raised by a tripwire: a BaseException, so that ``except Exception`` lets it through."""


# -- limits ------------------------------------------------------------------------------------
def limit(cpu_seconds, memory_bytes, file_bytes):
    """CPU seconds, address space and the size of any file written, where the OS has resource
    limits."""
    if resource is None:                          # Windows: the grader's wall clock still holds
        return
    for kind, value in ((resource.RLIMIT_CPU, int(cpu_seconds)),
                        (resource.RLIMIT_AS, int(memory_bytes)),
                        (resource.RLIMIT_FSIZE, int(file_bytes)), (resource.RLIMIT_CORE, 0)):
        try:
            soft, hard = resource.getrlimit(kind)
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            # CPU: SIGXCPU at the soft limit, SIGKILL one second later even if it is ignored
            resource.setrlimit(kind, (value, value + 1 if kind == resource.RLIMIT_CPU
                                      and hard == resource.RLIM_INFINITY else value))
        except (ValueError, OSError):
            pass


#: Audit events a submission never needs, refused once its code may run: walking the heap or
#: the heap to the originals the tripwires replaced, making functions or code objects (the
#: originals' code in a function of one's own), native code, other processes, signals.
REFUSED = ("gc.get_objects", "gc.get_referrers", "gc.get_referents",
           "sys._current_frames", "function.__new__", "code.__new__", "sys.settrace",
           "sys.setprofile", "subprocess.Popen", "os.system", "os.exec", "os.posix_spawn",
           "os.spawn", "os.fork", "os.forkpty", "os.kill", "os.killpg", "signal.pthread_kill",
           "pty.spawn", "os.startfile", "socket.__new__", "socket.connect", "_thread.start_new_thread")


#: The audit events that change the file system, and their (paths, dir_fd) from the arguments.
WRITES = {
    "os.rename": lambda a: (a[:2], a[2] if a[2] is not None else a[3]),
    "os.remove": lambda a: (a[:1], a[1]), "os.rmdir": lambda a: (a[:1], a[1]),
    "os.mkdir": lambda a: (a[:1], a[2]), "os.chmod": lambda a: (a[:1], a[2]),
    "os.chown": lambda a: (a[:1], a[3]), "os.utime": lambda a: (a[:1], a[3]),
    "os.truncate": lambda a: (a[:1], None), "os.symlink": lambda a: (a[1:2], a[2]),
    "os.link": lambda a: (a[1:2], a[2] if a[2] is not None else a[3]),
    "shutil.copyfile": lambda a: (a[1:2], None), "shutil.rmtree": lambda a: (a[:1], a[1]),
    "os.mkfifo": lambda a: (a[:1], a[2]), "os.mknod": lambda a: (a[:1], a[3]),
}


def _writes(args):
    """Whether an "open" event's (path, mode, flags) may write."""
    mode, flags = (list(args) + [None, None])[1:3]
    if isinstance(mode, str) and any(c in mode for c in "wax+"):
        return True
    return isinstance(flags, int) and bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT
                                                    | os.O_TRUNC | os.O_APPEND))


class _Pass(BaseException):
    """What the guard raises to a tripwire called from the package: the original, to call."""


def keep_out(folders, tripwire_code=None, fetch_code=None):
    """Install the child's guard, an audit hook (which nothing can remove, and whose state no
    object the student can reach holds): from now on it refuses to open any file under
    ``folders`` (the solutions, the other submissions), the package's own code (``.py``,
    ``.pyc``: a reload or an ``exec`` of its source would bring back what the tripwires
    replaced; its data files stay readable) and another process's memory; once armed (the
    event "mlp_ref.arm", sent before the student's file runs) it refuses the REFUSED events and
    a function's new ``__code__``, and answers each tripwire ("mlp_ref.trip", from ``_fetch``):
    when the stack is ``_fetch`` over a tripwire over the package's own code (code objects
    compared by identity, with the ones this hook was given, not by file name or a global) it
    hands over the original; otherwise it raises UsedPackage."""
    folders = tuple(os.path.realpath(f) + os.sep for f in folders if f)
    package = os.path.realpath(PACKAGE_DIR) + os.sep
    state = {"armed": False, "originals": {}, "codes": frozenset(), "inside": 0}
    own = os.path.realpath(os.getcwd()) + os.sep

    def refuse_path(path, event):
        real = os.path.realpath(os.fsdecode(path))
        if any((real + os.sep).startswith(f) for f in folders) or (event == "open" and any(
                f.startswith(real + os.sep) and os.path.isdir(real) for f in folders)):
            raise PermissionError(f"{os.fsdecode(path)}: the grader keeps the solutions and the "
                                  f"other submissions out of reach")
        if real.startswith(package) and real.endswith((".py", ".pyc")):
            raise PermissionError(f"{os.fsdecode(path)}: the grader keeps mlp_ref's code "
                                  f"out of reach (import only what the exercise imports)")
        parts = real.split(os.sep)
        if len(parts) > 3 and parts[1] == "proc" and parts[2] not in ("self", str(os.getpid())) \
                and parts[3] in ("mem", "environ", "maps", "fd", "root", "cwd"):
            raise PermissionError(f"{os.fsdecode(path)}: another process's")

    def refuse_write(path, dir_fd):
        """Writes stay in the child's own folder (its working folder, where TMPDIR points)."""
        if isinstance(path, int):                 # an open descriptor: opened under this guard
            return
        path = os.fsdecode(path)
        if isinstance(dir_fd, int) and dir_fd >= 0:                 # AT_FDCWD arrives as -100
            try:                                  # the folder the descriptor is open on (Linux)
                path = os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), path)
            except OSError:
                path = None
        real = None if path is None else os.path.realpath(path)
        if real is None or not (real + os.sep).startswith(own):
            raise PermissionError(f"{path}: the grader lets a submission write in its own "
                                  f"folder only")

    def hook(event, args):
        if state["inside"]:                       # the guard's own look at the stack
            return
        if event == "mlp_ref.trip":
            if not state["armed"]:
                raise _Pass(state["originals"][args[0]])
            state["inside"] += 1
            try:                                  # _fetch <- a tripwire <- the package
                fetch = sys._getframe(1)
                frame = fetch.f_back
                ours = fetch.f_code is fetch_code and frame is not None \
                    and frame.f_code is tripwire_code and frame.f_back is not None \
                    and frame.f_back.f_code in state["codes"]
                f = state["originals"].get(args[0]) if ours else None
            finally:
                state["inside"] -= 1
            if f is None:
                TRIPPED.append(args[0])
                raise UsedPackage(f"mlp_ref's own {args[0]}: the exercise asks you to write it")
            raise _Pass(f)
        if event == "mlp_ref.tripwires" and not state["armed"]:
            state["originals"], state["codes"] = dict(args[0]), frozenset(args[1])
        elif event == "mlp_ref.arm":
            state["armed"] = True
        elif event in ("open", "os.symlink", "os.link", "shutil.copyfile", "os.listdir",
                       "os.scandir") and args and isinstance(args[0], (str, bytes, os.PathLike)):
            refuse_path(args[0], event)      # a folder above them: no os.open(..., dir_fd=)
            if state["armed"] and event == "open" and _writes(args):
                refuse_write(args[0], None)
        if state["armed"] and event in WRITES:
            paths, dir_fd = WRITES[event](args)
            for path in paths:
                refuse_write(path, dir_fd)
        elif state["armed"] and (event in REFUSED or event.startswith("ctypes.") or (
                event == "object.__setattr__" and len(args) > 1 and args[1] == "__code__")):
            raise PermissionError(f"{event}: not something an exercise needs; the grader refuses it")

    sys.addaudithook(hook)


# -- tripwires ---------------------------------------------------------------------------------
def _fetch(name):
    """The original of the tripwire ``name`` from the guard, which checks the stack (this frame,
    a tripwire's below it, the package's code below that) and raises UsedPackage otherwise."""
    try:
        sys.audit("mlp_ref.trip", name)
    except _Pass as allowed:
        return allowed.args[0]
    raise UsedPackage(f"mlp_ref's own {name}: the exercise asks you to write it")


def _tripwire(f, name):
    def tripwire(*args, **kwargs):
        # the original lives on this frame's value stack only, in no name a frame can show
        return _fetch(name)(*args, **kwargs)
    tripwire.__name__, tripwire.__qualname__, tripwire.__doc__ = f.__name__, f.__qualname__, f.__doc__
    return tripwire


TRIPWIRE_CODE = _tripwire(len, "").__code__
FETCH_CODE = _fetch.__code__


def _codes(obj, found):
    """Every code object of the function ``obj``, its nested functions' included."""
    stack = [obj.__code__]
    while stack:
        code = stack.pop()
        if code not in found:
            found.add(code)
            stack += [c for c in code.co_consts if isinstance(c, types.CodeType)]


def package_codes():
    """The code objects of every function of mlp_ref loaded in this process (methods, nested
    functions, the functions inside partials and decorators' wrappers)."""
    found = set()
    for name, module in list(sys.modules.items()):
        if not (name == "mlp_ref" or name.startswith("mlp_ref.")) or name.startswith(
                "mlp_ref.classroom.grading"):
            continue
        for obj in list(vars(module).values()):
            for f in [obj] + (list(vars(obj).values()) if isinstance(obj, type) else []):
                f = getattr(f, "fget", f)             # properties
                while True:
                    if isinstance(f, types.FunctionType):
                        _codes(f, found)
                        for cell in f.__closure__ or ():
                            try:
                                inner = cell.cell_contents
                            except ValueError:
                                continue
                            if isinstance(inner, types.FunctionType):
                                _codes(inner, found)
                    nxt = getattr(f, "__wrapped__", None) or getattr(f, "func", None)
                    if nxt is None or nxt is f or not callable(nxt):
                        break
                    f = nxt
    return found


def _short(module_name):
    return module_name[len("mlp_ref."):] if module_name.startswith("mlp_ref.") else module_name


def install_tripwires(allowed):
    """Every function and class method of mlp_ref (private ones too: a helper can do the work),
    except ``allowed`` ("jacobian.flatten", "network.MLP": a class with its bases and methods),
    replaced by a tripwire, wherever the package holds it: a module's name, a class, and the
    tables, named tuples and partials of its modules (``activations.ACTIVATIONS[...].df``)."""
    allowed = set(allowed)
    for name in list(allowed):
        module, _, attr = name.rpartition(".")
        obj = getattr(sys.modules.get(f"mlp_ref.{module}"), attr, None)
        if isinstance(obj, type):
            allowed |= {f"{_short(c.__module__)}.{c.__qualname__}" for c in obj.__mro__}
    codes = package_codes()                       # before any function is replaced
    wrapped, done, originals = {}, set(), {}
    modules = [m for n, m in list(sys.modules.items())
               if (n == "mlp_ref" or n.startswith("mlp_ref.")) and not n.startswith("mlp_ref.classroom.grading")
               and isinstance(m, types.ModuleType)]
    for module in modules:
        for attr, obj in list(vars(module).items()):
            owner = getattr(obj, "__module__", None) or ""
            if (attr.startswith("__") or not owner.startswith("mlp_ref")
                    or owner.startswith("mlp_ref.classroom.grading")):
                continue
            key = f"{_short(owner)}.{getattr(obj, '__qualname__', attr)}"
            if isinstance(obj, types.FunctionType) and key not in allowed:
                if id(obj) not in wrapped:
                    wrapped[id(obj)] = _tripwire(obj, key)
                    originals[key] = obj
                setattr(module, attr, wrapped[id(obj)])
            elif isinstance(obj, type) and key not in allowed and obj not in done:
                done.add(obj)
                for method, f in list(vars(obj).items()):
                    if isinstance(f, types.FunctionType) and (not method.startswith("__")
                                                               or method in ("__init__", "__call__")):
                        wrapped[id(f)] = _tripwire(f, f"{key}.{method}")
                        setattr(obj, method, wrapped[id(f)])
                        originals[f"{key}.{method}"] = f
    for module in modules:                        # the tables that hold them
        for attr, obj in list(vars(module).items()):
            if not isinstance(obj, (types.FunctionType, type, types.ModuleType)):
                new = _swapped(obj, wrapped)
                if new is not obj:
                    setattr(module, attr, new)
    sys.audit("mlp_ref.tripwires", originals, codes)      # the guard keeps them; nothing else


def _swapped(obj, wrapped, depth=0):
    """``obj`` with every function of ``wrapped`` in it replaced by its tripwire: a dict or a
    list changed in place (others hold it too), a tuple, named tuple or partial made anew."""
    if depth > 4:
        return obj
    if isinstance(obj, types.FunctionType):
        return wrapped.get(id(obj), obj)
    if type(obj) is dict:
        for k, v in list(obj.items()):
            new = _swapped(v, wrapped, depth + 1)
            if new is not v:
                obj[k] = new
        return obj
    if type(obj) is list:
        obj[:] = [_swapped(v, wrapped, depth + 1) for v in obj]
        return obj
    if isinstance(obj, tuple):
        items = [_swapped(v, wrapped, depth + 1) for v in obj]
        if all(a is b for a, b in zip(items, obj)):
            return obj
        return type(obj)._make(items) if hasattr(type(obj), "_make") else tuple(items)
    if isinstance(obj, functools.partial):
        func = _swapped(obj.func, wrapped, depth + 1)
        return obj if func is obj.func else functools.partial(func, *obj.args, **obj.keywords)
    return obj


# -- running the student's code ----------------------------------------------------------------
def _one_line(text, limit=300):
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _safe_str(exc):
    try:
        return _one_line(str(exc))
    except BaseException:                         # noqa: BLE001 - a __str__ that raises
        return ""


def raised(exc, path):
    """What an exception from the student's code was, as plain data."""
    line, stage, hint = hints.describe(exc, exc.__traceback__, path)
    if isinstance(exc, UsedPackage) or TRIPPED:
        return {"used": TRIPPED[0] if TRIPPED else ""}
    if type(exc) is NotImplementedError:
        return {"todo": True}
    if isinstance(exc, SystemExit):
        code = exc.code
        return {"exit": "exit()" if code is None else f"exit({_one_line(repr(code), 60)})", "line": line}
    return {"raised": _one_line(type(exc).__name__, 60), "message": _safe_str(exc), "line": line,
            "stage": _one_line(stage, 40), "hint": _one_line(hint)}


def load(request):
    """The student's module, or a one-line problem."""
    path, source = request["path"], request["source"]
    linecache.cache[path] = (len(source), None, source.splitlines(True), path)
    folder = request["folder"]
    if folder and folder not in sys.path:
        sys.path.insert(0, folder)                # helper modules beside the file
    try:
        code = compile(source, path, "exec", dont_inherit=True)
    except SyntaxError as exc:
        where = f" at line {exc.lineno}" if exc.lineno else ""
        return None, {"problem": f"syntax error{where}: {_one_line(exc.msg, 120)}"}
    except BaseException as exc:                  # noqa: BLE001 - too deep to compile
        return None, {"problem": f"cannot be compiled ({type(exc).__name__})"}
    module = types.ModuleType(f"submission_{os.getpid()}")
    module.__file__ = path
    sys.modules[module.__name__] = module
    try:
        exec(code, module.__dict__)
    except BaseException as exc:                  # noqa: BLE001 - the student's code
        what = raised(exc, path)
        where = f" (line {what['line']})" if what.get("line") else ""
        if "used" in what:
            return None, {"problem": f"importing it calls {what['used']}, which the exercise asks "
                                     f"you to write"}
        if "exit" in what:
            return None, {"problem": f"importing it called exit ({what['exit']}){where}: remove "
                                     f"it, the grader calls your functions"}
        if "todo" in what:
            what = {"raised": "NotImplementedError", "message": ""}
        return None, {"problem": f"importing it raised {what['raised']}: {what['message']}{where}"}
    return module, None


def recording(name, f):
    def recorded(*args, **kwargs):
        CALLED.add(name)
        return f(*args, **kwargs)
    recorded.__name__ = name
    return recorded


def stand_in(name, rfd, wfd):
    """A function that asks the grader for its reference answer to ``name(*args)`` and leaves
    the arguments as the reference left them (a network stepped in place)."""
    def ask(*args):
        CALLED.add(name)
        wire.send(wfd, {"stand_in": name, "args": [wire.net_spec(a) if isinstance(a, network.MLP)
                                                   else a for a in args]})
        reply = wire.receive(rfd)
        if "result" not in reply:
            raise ValueError(f"the grader's {name} refused these arguments: {reply.get('refused')}")
        leave_as(args, reply["after"])
        return reply["result"]
    ask.__name__ = name
    return ask


def leave_as(args, after):
    """Make the student's arguments what the reference left of its copies of them, writing
    only where the reference changed one (a network it stepped): an argument it left as it came
    is not touched, so a read-only array (``np.broadcast_to``) or a student's object is never
    written into by the grader."""
    for given, left in zip(args, after):
        if isinstance(given, network.MLP):
            for k, v in given.params.items():
                new = left["params"][k]
                if not np.array_equal(v, new, equal_nan=True):
                    v[...] = new
        elif type(given) is np.ndarray and not np.array_equal(given, left, equal_nan=True):
            given[...] = left


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    rfd, wfd = int(argv[0]), int(argv[1])
    request = wire.receive(rfd)
    limit(request["cpu_seconds"], request["memory_bytes"], request["file_bytes"])
    keep_out(request["keep_out"], TRIPWIRE_CODE, FETCH_CODE)
    install_tripwires(request["allowed"])
    wire.send(wfd, {"ready": True})               # the grader's clock for the import starts now
    sys.audit("mlp_ref.arm")                      # the guard is strict from here on
    module, problem = load(request)
    if problem:
        wire.send(wfd, problem)
        return
    exercise = getattr(module, "EXERCISE", None)
    names = request["functions"]
    originals = {n: getattr(module, n, None) for n in names}
    for n, f in originals.items():               # calls between the exercise's own functions
        if isinstance(f, types.FunctionType):
            setattr(module, n, recording(n, f))
    answers = {}
    for n in request["answers"]:                  # "predict, then run": the values written
        value = getattr(module, n, None)
        answers[n] = value if type(value) in (int, float, str, bool) or value is None else \
            wire.Other(type(value).__name__)
    wire.send(wfd, {"exercise": exercise if type(exercise) is str else None,
                    "functions": [n for n, f in originals.items() if callable(f)],
                    "answers": answers})
    while True:
        call = wire.receive(rfd)
        fn = originals[call["function"]]
        for n in call.get("stand_ins", []):       # the grader's own answer in place of a callee
            setattr(module, n, stand_in(n, rfd, wfd))
        args = [wire.build_net(a) if type(a) is wire.NetSpec else a for a in call["args"]]
        kwargs = call["kwargs"]
        CALLED.clear()
        del TRIPPED[:]
        try:
            with np.errstate(all="ignore"):       # a student's overflow is a FAIL, not noise
                result = fn(*args, **kwargs)
            answer = {"result": result}
        except BaseException as exc:              # noqa: BLE001 - everything is reported
            answer = raised(exc, request["path"])
            traceback.clear_frames(exc.__traceback__)     # free what the function held (a
            del exc                                       # MemoryError's hoard) before replying
        if TRIPPED and "used" not in answer:     # a tripwire the student's code caught
            answer = {"used": TRIPPED[0]}
        answer["after"] = [{"params": a.params} if isinstance(a, network.MLP) else a for a in args]
        answer["calls"] = sorted(CALLED - {call["function"]})
        for n in call.get("stand_ins", []):
            setattr(module, n, recording(n, originals[n]))
        wire.send(wfd, answer)


if __name__ == "__main__":
    main()
