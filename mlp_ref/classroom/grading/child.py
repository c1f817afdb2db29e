"""The child process that runs one submission: ``python -m mlp_ref.classroom.grading.child IN OUT``.

The grader (``runner``) starts it in a folder of its own, in a session of its own (so that the
teacher's Ctrl-C reaches the grader alone), and talks to it over two pipes (file descriptors IN
and OUT), never over standard output, which the student's prints may fill or close. It

1. reads the load request, then limits itself (CPU seconds, address space, file size);
2. keeps the exercise's solutions folder out of reach (an audit hook refuses to open files
   there: a submission that reads or ``exec``s a solution fails to import it), and replaces
   every public function of mlp_ref that the exercise does not allow with a *tripwire*: called
   from the student's code it records its name and raises, called from mlp_ref's own code it
   does what it always did (a network's ``gradient`` still runs its ``backward``);
3. runs the student's file as a module and answers each call request with the function's
   result and its arguments afterwards, as plain data (``wire``), or with what it raised.

It computes no reference answer: those stay in the grader's process. This isolates the grader
from the student's code; it is not a security sandbox (grade untrusted files in a container).
"""
from __future__ import annotations

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


def keep_out(folder):
    """Refuse, from now on, to open any file under ``folder`` (the solutions) and the package's
    own code (``.py``, ``.pyc``: a reload or an ``exec`` of its source would bring back the
    functions the tripwires replaced; its data files stay readable). An audit hook cannot be
    removed."""
    folders = [os.path.realpath(f) + os.sep for f in [folder] if f]
    package = os.path.realpath(PACKAGE_DIR) + os.sep

    def hook(event, args):
        if event in ("open", "os.symlink", "os.link", "shutil.copyfile", "os.listdir",
                     "os.scandir") and args:
            path = args[0]
            if isinstance(path, (str, bytes, os.PathLike)):
                real = os.path.realpath(os.fsdecode(path))
                if any((real + os.sep).startswith(f) for f in folders):
                    raise PermissionError(f"{os.fsdecode(path)}: the grader keeps the solutions "
                                          f"out of reach")
                if real.startswith(package) and real.endswith((".py", ".pyc")):
                    raise PermissionError(f"{os.fsdecode(path)}: the grader keeps mlp_ref's code "
                                          f"out of reach (import only what the exercise imports)")

    sys.addaudithook(hook)


# -- tripwires ---------------------------------------------------------------------------------
def _tripwire(f, name):
    def tripwire(*args, **kwargs):
        if not sys._getframe(1).f_code.co_filename.startswith(PACKAGE_DIR):
            TRIPPED.append(name)
            raise UsedPackage(f"mlp_ref's own {name}: the exercise asks you to write it")
        return f(*args, **kwargs)
    tripwire.__name__, tripwire.__qualname__, tripwire.__doc__ = f.__name__, f.__qualname__, f.__doc__
    return tripwire


def _short(module_name):
    return module_name[len("mlp_ref."):] if module_name.startswith("mlp_ref.") else module_name


def install_tripwires(allowed):
    """Every public function and class method of mlp_ref, except ``allowed`` ("jacobian.flatten",
    "network.MLP": a class with its bases and methods), replaced by a tripwire."""
    allowed = set(allowed)
    for name in list(allowed):
        module, _, attr = name.rpartition(".")
        obj = getattr(sys.modules.get(f"mlp_ref.{module}"), attr, None)
        if isinstance(obj, type):
            allowed |= {f"{_short(c.__module__)}.{c.__qualname__}" for c in obj.__mro__}
    wrapped, done = {}, set()
    modules = [m for n, m in list(sys.modules.items())
               if (n == "mlp_ref" or n.startswith("mlp_ref.")) and not n.startswith("mlp_ref.classroom.grading")
               and isinstance(m, types.ModuleType)]
    for module in modules:
        for attr, obj in list(vars(module).items()):
            owner = getattr(obj, "__module__", None) or ""
            if attr.startswith("_") or not owner.startswith("mlp_ref") or owner.startswith("mlp_ref.classroom.grading"):
                continue
            key = f"{_short(owner)}.{getattr(obj, '__qualname__', attr)}"
            if isinstance(obj, types.FunctionType) and key not in allowed:
                if id(obj) not in wrapped:
                    wrapped[id(obj)] = _tripwire(obj, key)
                setattr(module, attr, wrapped[id(obj)])
            elif isinstance(obj, type) and key not in allowed and obj not in done:
                done.add(obj)
                for method, f in list(vars(obj).items()):
                    if isinstance(f, types.FunctionType) and (not method.startswith("_")
                                                               or method in ("__init__", "__call__")):
                        setattr(obj, method, _tripwire(f, f"{key}.{method}"))


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
        return None, {"problem": f"syntax error at line {exc.lineno}: {_one_line(exc.msg, 120)}"}
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
        for given, left in zip(args, reply["after"]):
            if isinstance(given, network.MLP):
                for k, v in given.params.items():
                    v[...] = left["params"][k]
            elif type(given) is np.ndarray:
                given[...] = left
        return reply["result"]
    ask.__name__ = name
    return ask


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    rfd, wfd = int(argv[0]), int(argv[1])
    request = wire.receive(rfd)
    limit(request["cpu_seconds"], request["memory_bytes"], request["file_bytes"])
    keep_out(request["keep_out"])
    install_tripwires(request["allowed"])
    wire.send(wfd, {"ready": True})               # the grader's clock for the import starts now
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
