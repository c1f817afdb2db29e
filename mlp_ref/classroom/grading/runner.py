"""The grader's side of a submission: its child process, and its functions as remote calls.

``Submission`` starts the child (``child``) in the isolation ``sandbox`` chooses, in a folder and a
session of its own, seeing of the submission's folder the file, its helpers and its data but not
the other submissions (``beside``), sends it the file's source (its path made absolute, so that
``__file__`` finds what lies beside it), and then turns each call a check makes, ``fn(net, X, G)``,
into a request: the arguments go as plain data (a network as its sizes, activations and
parameters), the answer comes back as plain data, and what the function did to its arguments
is copied back into the grader's objects, so that a check can still say "net must not change".

Whatever the child does (exits with any status, closes its pipes, hangs, ignores signals,
sends garbage or a frame that would inflate, exceeds its memory), the call raises a
``StudentProblem`` that the grade turns into one line; a child that has gone is started again
for the next function, and when a file is done its child and everything it started are killed
(``sandbox.end``). The grader's wall clock bounds each function; the child's CPU-time and
address-space limits back it up.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from ...network import MLP
from . import child, sandbox, wire
from .answers import Wrong

#: Address space the child may use (bytes): the package with NumPy needs about 0.3 GiB of it,
#: the largest exercise a few MiB more; a runaway allocation fails with a MemoryError there.
MEMORY_LIMIT = 2 * 2 ** 30


class StudentProblem(Exception):
    """Something the student's code did instead of answering: one line, maybe a hint."""

    def __init__(self, status, what, hint="", restart=False):
        super().__init__(what)
        self.status, self.what, self.hint, self.restart = status, what, hint, restart


class Todo(StudentProblem):
    def __init__(self):
        super().__init__("TODO", "not implemented yet")


def _signal_name(number):
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _ended(returncode):
    if returncode is None:
        return "closed its channel to the grader"
    if returncode < 0:
        name = _signal_name(-returncode)
        why = {"SIGKILL": " (its memory or CPU-time limit?)", "SIGXCPU": " (its CPU-time limit)",
               "SIGSEGV": " (a crash)"}.get(name, "")
        return f"was ended by {name}{why}"
    return f"ended (exit status {returncode})"


#: The grader's own package folder: the child imports the lesson from its view, never from here.
PACKAGE = str(Path(__file__).resolve().parents[2])

#: The most entries of a submission's folder the child may see beside it (helpers, data).
MAX_BESIDE = 200


#: What a class folder may hold that Python would import in place of the grader's own code when
#: ``python -m mlp_ref`` is started in that folder (``mlp_ref.py`` runs before any line of ours).
SHADOWS = ("mlp_ref.py", "mlp_ref", "numpy.py", "numpy")


def shadows(paths):
    """The files and folders in the folders ``paths`` (and the folders of the files) named as
    the grader's own modules: the teacher is told never to start ``python -m`` beside them."""
    folders = {Path(p) if Path(p).is_dir() else Path(p).parent for p in paths}
    return sorted(str(f / name) for f in folders for name in SHADOWS if (f / name).exists())


def beside(path, others):
    """What of ``path``'s folder its child may read (at the same paths): the file itself and
    every entry but the other submissions (a folder holding one is entered, not shown whole)."""
    me = Path(path).resolve()
    hidden = {Path(o) for o in others}
    shown = [me]

    def walk(folder):
        try:
            entries = sorted(folder.iterdir())
        except OSError:
            return
        for entry in entries:
            if len(shown) >= MAX_BESIDE:
                return
            real = entry.resolve()
            if real == me or real in hidden or entry.name == "__pycache__" or entry.is_symlink():
                continue
            if entry.is_dir() and any(h.is_relative_to(real) for h in hidden):
                walk(entry)
            elif entry.is_dir() or entry.is_file():
                shown.append(real)

    walk(me.parent)
    return shown


class Submission:
    """One student's file, run in a child process (``isolate=True``) or in this one (tests)."""

    def __init__(self, path, source, exercise, functions, allowed, answers, time_limit,
                 memory_limit=MEMORY_LIMIT, keep_out=None, isolate=True, others=()):
        self.path, self.source, self.exercise = str(path), source, exercise
        self.functions, self.allowed, self.answer_names = list(functions), list(allowed), list(answers)
        self.time_limit, self.memory_limit, self.keep_out = time_limit, memory_limit, keep_out
        self.isolate = isolate
        self.proc = self.folder = None
        self.isolation = sandbox.Isolation("none", "in the grader's process") if not isolate else None
        self.others = list(others) if isolate else []    # the other submissions: kept out of reach
        self.budget = time_limit                  # seconds of the current function left
        self.calls = set()                        # the exercise's functions the current one called
        self.stand_ins = {}                       # callee -> the grader's reference, for a re-run
        self.file_bytes = 64 * 2 ** 20            # the largest file the child may write

    # -- the child -----------------------------------------------------------------------------
    def start(self):
        """Start the child and load the file: (functions defined, answers written), or raise
        StudentProblem with the file's one-line problem (status "FILE")."""
        if not self.isolate:
            return self._load_here()
        self.folder = tempfile.mkdtemp(prefix="mlp_ref_check_")
        from_parent, to_child = os.pipe()
        from_child, to_parent = os.pipe()
        env = {"PATH": "/usr/bin:/bin", "HOME": sandbox.HOME_MOUNT, "LANG": "C.UTF-8",
               "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
               "PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "Agg"}
        self.isolation = sandbox.choose()
        env["TMPDIR"] = sandbox.HOME_MOUNT if self.isolation.kind == "bubblewrap" else self.folder
        try:
            self.proc = sandbox.start(self.isolation, (from_parent, to_parent),
                                      beside(self.path, self.others), env, self.folder)
        except OSError as exc:
            for fd in (from_parent, to_parent, to_child, from_child):
                os.close(fd)
            raise StudentProblem("FILE", f"the grader could not start its child process "
                                         f"({exc.strerror or exc})") from None
        os.close(from_parent)
        os.close(to_parent)
        self.to_child, self.from_child = to_child, from_child
        cpu = self.time_limit * (len(self.functions) + 2) + 10
        request = {"path": os.path.abspath(self.path), "source": self.source,
                   "folder": os.path.dirname(os.path.abspath(self.path)),
                   "allowed": self.allowed, "functions": self.functions,
                   "answers": self.answer_names, "cpu_seconds": cpu,
                   "memory_bytes": self.memory_limit,
                   "keep_out": [p for p in [self.keep_out, PACKAGE] if p] + self.others,
                   "file_bytes": self.file_bytes}
        try:
            # the child's own start (Python, NumPy, the package) is not the student's time
            wire.send(self.to_child, request, time.monotonic() + 60)
            wire.receive(self.from_child, time.monotonic() + 60)
            reply = wire.receive(self.from_child, time.monotonic() + self.time_limit)
        except wire.TimedOut:
            self.stop()
            raise StudentProblem("FILE", f"importing it took more than {self.time_limit:g} s "
                                         f"(an endless loop at the top level?)") from None
        except (wire.Closed, wire.BadFrame):
            rc = self._exit_status()              # ended by itself, or only closed its pipes
            self.stop()
            raise StudentProblem("FILE", f"the process running it {_ended(rc)} while importing "
                                         f"it") from None
        if type(reply) is not dict or "problem" in reply:
            self.stop()
            problem = reply.get("problem") if type(reply) is dict else None
            raise StudentProblem("FILE", problem if type(problem) is str else "its import sent "
                                 "something that is not an answer")
        return self._loaded(reply)

    def _loaded(self, reply):
        functions = reply.get("functions")
        answers = reply.get("answers")
        if type(functions) is not list or type(answers) is not dict:
            raise StudentProblem("FILE", "its import sent something that is not an answer")
        return [f for f in functions if f in self.functions], answers

    def _load_here(self):
        module, problem = child.load({"path": self.path, "source": self.source, "folder": None})
        if problem:
            raise StudentProblem("FILE", problem["problem"])
        self.module = module
        self.originals = {n: getattr(module, n, None) for n in self.functions}
        for n, f in self.originals.items():      # calls between the exercise's own functions
            if callable(f):
                setattr(module, n, child.recording(n, f))
        return self._loaded(wire.decode(wire.encode({
            "functions": [n for n in self.functions if callable(getattr(module, n, None))],
            "answers": {n: getattr(module, n, None) for n in self.answer_names}})))

    def stop(self):
        """End the child (its whole session) and remove its folder; its exit status or None."""
        rc = None
        if self.proc is not None:
            for fd in (self.to_child, self.from_child):     # a child between calls ends by
                try:                                        # itself when its pipes close
                    os.close(fd)
                except OSError:
                    pass
            rc = sandbox.end(self.isolation, self.proc)
            self.proc = None
        if self.folder:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None
        return rc

    def _exit_status(self):
        """The child's exit status once it has ended by itself (a short wait), else None (it
        closed its pipes and lives on). Under bubblewrap, 128 + n is the child's signal n."""
        try:
            rc = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return None
        if self.isolation.kind == "bubblewrap" and 128 < rc < 128 + 65:
            return -(rc - 128)
        return rc

    # -- calls ---------------------------------------------------------------------------------
    def begin(self, function, stand_ins=None):
        """Start grading ``function``: a fresh wall-clock budget, a child running; ``stand_ins``
        (name -> reference function): the callees the grader answers for, in this run. The
        reference's answers then reach the child: it is a fresh one that may write no file,
        so that it cannot keep them for another submission (through the file system)."""
        self.budget, self.calls, self.current = self.time_limit, set(), function
        if stand_ins and self.isolate and self.file_bytes:
            self.stop()
            self.file_bytes = 0
        self.stand_ins = dict(stand_ins or {})
        if self.isolate and self.proc is None:
            self.start()

    def function(self, name):
        return lambda *args, **kwargs: self.call(name, args, kwargs)

    def call(self, name, args, kwargs):
        """``name(*args, **kwargs)`` in the child: its result as plain data, the arguments
        updated as the function left them, or StudentProblem."""
        sent = [wire.net_spec(a) if isinstance(a, MLP) else a for a in args]
        message = {"function": name, "args": sent, "kwargs": kwargs,
                   "stand_ins": sorted(self.stand_ins)}
        if self.isolate:
            reply = self._remote(message)
        else:
            reply = self._here(message)
        if type(reply) is not dict:
            raise StudentProblem("ERROR", "the process sent something that is not an answer")
        calls = reply.get("calls")
        if type(calls) is list:
            self.calls |= {c for c in calls if c in self.functions and type(c) is str}
        _answer_problem(reply)
        after = reply.get("after")
        if type(after) is not list or len(after) != len(args):
            raise StudentProblem("ERROR", "the process sent something that is not an answer")
        for given, left in zip(args, after):
            _copy_back(given, left)
        return reply["result"]

    def _remote(self, message):
        if self.proc is None:
            self.start()
        started = time.monotonic()
        deadline = started + max(self.budget, 0.0)
        try:
            wire.send(self.to_child, message, deadline)
            reply = wire.receive(self.from_child, deadline)
            while type(reply) is dict and "stand_in" in reply:    # a callee the grader answers
                wire.send(self.to_child, self._stand_in(reply), deadline)
                reply = wire.receive(self.from_child, deadline)
        except wire.TimedOut:
            self.stop()
            raise StudentProblem("ERROR", f"still running after {self.time_limit:g} s (an endless "
                                          f"loop?): stopped") from None
        except wire.Closed:
            rc = self._exit_status()
            self.stop()
            raise StudentProblem("ERROR", f"the process running it {_ended(rc)} during the call: "
                                          f"return a value instead") from None
        except wire.BadFrame as exc:
            self.stop()
            raise StudentProblem("ERROR", f"the process sent something that is not an answer "
                                          f"({exc}): stopped") from None
        finally:
            self.budget -= time.monotonic() - started
        return reply

    def _stand_in(self, request):
        """The grader's answer to a stand-in's request: the reference's result and what it left
        of the arguments, or what it refused (from the child: checked like any answer)."""
        reference = self.stand_ins.get(request.get("stand_in"))
        args = request.get("args")
        if reference is None or type(args) is not list:
            return {"refused": "not a function the grader stands in for"}
        try:
            args = [wire.build_net(a) if type(a) is wire.NetSpec else a for a in args]
            with np.errstate(all="ignore"):
                result = reference(*args)
        except Exception as exc:                  # noqa: BLE001 - arguments the reference refuses
            return {"refused": f"{type(exc).__name__}"}
        return {"result": result, "after": [{"params": a.params} if isinstance(a, MLP) else a
                                             for a in args]}

    def _here(self, message):
        fn = self.originals[message["function"]]
        for n in self.stand_ins:                 # the grader's reference in place of a callee
            setattr(self.module, n, self._stand_in_here(n))
        child.CALLED.clear()
        args = [wire.build_net(a) if type(a) is wire.NetSpec else a
                for a in wire.decode(wire.encode(message["args"]))]
        try:
            with np.errstate(all="ignore"):
                answer = {"result": fn(*args, **message["kwargs"])}
        except (Exception, SystemExit) as exc:    # noqa: BLE001 - the student's code
            answer = child.raised(exc, self.path)
        answer["after"] = [{"params": a.params} if hasattr(a, "params") else a for a in args]
        answer["calls"] = sorted(child.CALLED - {message["function"]})
        for n in self.stand_ins:
            setattr(self.module, n, child.recording(n, self.originals[n]))
        return wire.decode(wire.encode(answer))

    def _stand_in_here(self, name):
        def ask(*args):
            child.CALLED.add(name)
            reply = wire.decode(wire.encode(self._stand_in(wire.decode(wire.encode(
                {"stand_in": name, "args": [wire.net_spec(a) if isinstance(a, MLP) else a
                                            for a in args]})))))
            if "result" not in reply:
                raise ValueError(f"the grader's {name} refused these arguments")
            child.leave_as(args, reply["after"])
            return reply["result"]
        return ask


def _answer_problem(reply):
    """Raise the StudentProblem a reply reports, if any."""
    if "result" in reply:
        return
    if reply.get("todo") is True:
        raise Todo()
    used = reply.get("used")
    if type(used) is str:
        raise StudentProblem("FAIL", f"calls {used}, mlp_ref's own implementation: the exercise "
                                     f"asks you to write it", "use only what the file imports")
    where = f" (line {reply['line']})" if type(reply.get("line")) is int and reply["line"] else ""
    if type(reply.get("exit")) is str:
        raise StudentProblem("ERROR", f"called exit ({reply['exit']}){where}: return a value instead")
    kind, message = reply.get("raised"), reply.get("message")
    if type(kind) is str and type(message) is str:
        stage, hint = reply.get("stage"), reply.get("hint")
        stage = f"stage {stage}: " if type(stage) is str and stage else ""
        hint = hint if type(hint) is str else ""
        if hint:                                  # the shapes say more than numpy's message
            raise StudentProblem("ERROR", f"{stage}raised {kind}{where}", hint)
        raise StudentProblem("ERROR", f"{stage}raised {kind}{': ' + message if message else ''}{where}")
    raise StudentProblem("ERROR", "the process sent something that is not an answer")


def _copy_back(given, left):
    """Make the grader's argument what the student's function left of it (a check may ask
    whether it changed); a changed shape or a network with other keys is a failure."""
    if isinstance(given, MLP):
        params = left.get("params") if type(left) is dict else None
        if (type(params) is not dict or set(params) != set(given.params)
                or any(type(params[k]) is not np.ndarray or params[k].shape != v.shape
                       for k, v in given.params.items())):
            raise Wrong("net: your function replaced its parameters or changed their shapes",
                        "read net.params; change them only in place, and only where asked")
        for k, v in given.params.items():
            with np.errstate(all="ignore"):
                v[...] = params[k]
    elif type(given) is np.ndarray:
        if type(left) is not np.ndarray or left.shape != given.shape:
            raise Wrong(f"an argument of shape {given.shape} was replaced or changed shape",
                        "leave the arguments as they came")
        if not given.flags.writeable:             # the grader's own constant: it must not change
            if not np.array_equal(given, left, equal_nan=True):
                raise Wrong(f"an argument of shape {given.shape} was changed in place",
                            "leave the arguments as they came")
            return
        with np.errstate(all="ignore"):
            given[...] = left
