"""The grader's sandbox by itself, without the child's audit hook: what a process inside can
reach, and that nothing it starts outlives it (``mlp_ref/classroom/grading/sandbox.py``).

The lesson view's contents are checked fast; everything that starts a process is slow. The
bubblewrap tests run where bubblewrap starts, which CI makes sure of (``.ci/run`` installs it,
and a test fails in CI if the grader chose anything else); the uid fallback's mechanism is tested
as root (CI's user) with the shell, whatever Python the machine has.
"""
import io
import os
import signal
import subprocess
import sys
import sysconfig
import textwrap
import time
from pathlib import Path

import pytest

from mlp_ref.classroom import grading
from mlp_ref.classroom.grading import runner, sandbox

ROOT = Path(__file__).resolve().parents[1]


def test_the_lesson_view_holds_the_lesson_and_the_child_and_nothing_of_the_grader():
    view = Path(sandbox.lesson_view())
    files = {p.relative_to(view).as_posix() for p in view.rglob("*") if p.is_file()}
    assert {"mlp_ref/network.py", "mlp_ref/jacobian.py", "mlp_ref/boundary/checks.py",
            "mlp_ref/classroom/grading/child.py", "mlp_ref/classroom/grading/wire.py"} <= files
    grading = {f for f in files if f.startswith("mlp_ref/classroom/")}
    assert grading == {"mlp_ref/classroom/__init__.py", "mlp_ref/classroom/grading/__init__.py",
                       "mlp_ref/classroom/grading/child.py", "mlp_ref/classroom/grading/wire.py",
                       "mlp_ref/classroom/grading/hints.py"}
    assert not any("solutions" in f or f.endswith("answers.py") or f.endswith("__main__.py")
                   for f in files)
    # nobody but its owner (the grader) may write in it
    assert all(not (p.stat().st_mode & 0o022) for p in view.rglob("*"))
    argv = sandbox.child_argv(sandbox.Isolation("bubblewrap", ""), (7, 8))
    assert argv[1:5] == ["-I", "-S", "-B", "-c"] and argv[-2:] == ["7", "8"]


def test_an_isolation_asked_for_by_name_and_a_name_that_is_none():
    assert sandbox.choose("none").kind == "none" and "asked for" in str(sandbox.choose("none"))
    assert sandbox.choose("jail").kind == "none" and "'jail' is not bubblewrap, user or none" in \
        str(sandbox.choose("jail"))


def test_a_submission_sees_its_helpers_and_data_but_not_the_other_submissions(tmp_path):
    # helpers.py is a helper by the gradebook's rule (alice imports it), bob's file a submission
    for name, text in {"alice_01.py": 'from helpers import h\nEXERCISE = "01_layer_backward"\n',
                       "01_layer_backward_bob.py": "x = 1\n", "helpers.py": "def h():\n    pass\n",
                       "data.npy": "", "sub/carol.py": 'EXERCISE = "02_masked_loss"\n',
                       "sub/table.csv": "a\n", "assets/x.txt": "x"}.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    me = tmp_path / "alice_01.py"
    others = grading.other_submissions(me)
    assert {Path(o).name for o in others} == {"01_layer_backward_bob.py", "carol.py"}
    shown = {p.relative_to(tmp_path).as_posix() for p in map(Path, runner.beside(me, others))}
    assert shown == {"alice_01.py", "helpers.py", "data.npy", "assets", "sub/table.csv"}


def _bwrap_or_fail():
    why = sandbox._probe_bwrap()
    if why is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI installs bubblewrap, yet: {why}")
        pytest.skip(why)


def _run_inside(code, beside=(), timeout=60):
    """``code`` run by Python inside bubblewrap as the grader runs a child (no audit hook)."""
    sandbox.lesson_view()
    argv = sandbox.child_argv(sandbox.Isolation("bubblewrap", ""), ())
    argv[-1] = argv[-1].split("from mlp_ref")[0] + code
    proc = subprocess.Popen(sandbox.bwrap_command(argv, None, list(beside)), cwd="/",
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    return proc


@pytest.mark.slow
def test_inside_bubblewrap_the_grader_the_repository_and_the_network_are_out_of_reach():
    _bwrap_or_fail()
    me = os.getpid()
    code = textwrap.dedent(f'''
        import os, signal, socket, sys, sysconfig
        said = []
        def attempt(name, f):
            try:
                f()
                said.append(name + ": done")
            except BaseException as exc:
                said.append(name + ": " + type(exc).__name__)
        attempt("kill", lambda: os.kill({me}, signal.SIGTERM))
        attempt("mem", lambda: open("/proc/{me}/mem", "rb"))
        attempt("solutions", lambda: open({str(ROOT / "tutorials/exercises/solutions/04_projection.py")!r}))
        attempt("answers", lambda: __import__("mlp_ref.classroom.grading.answers"))
        attempt("pth", lambda: open(os.path.join({sysconfig.get_paths()["purelib"]!r}, "x.pth"), "w"))
        attempt("lesson", lambda: open("/grader/view/mlp_ref/planted.py", "w"))
        attempt("net", lambda: socket.create_connection(("1.1.1.1", 53), timeout=3))
        attempt("tmp", lambda: open("/tmp/mine", "w").write("x"))
        import numpy, mlp_ref.network
        print(os.getuid(), os.getppid(), ";".join(said))
    ''')
    out, err = _run_inside(code).communicate(timeout=60)
    uid, ppid, said = out.split(" ", 2)
    said = dict(s.split(": ") for s in said.strip().split(";"))
    assert (uid, ppid) == ("65534", "1"), out      # the grader is not its parent there
    assert said["kill"] == "ProcessLookupError" and said["mem"] == "FileNotFoundError", said
    assert said["solutions"] == "FileNotFoundError" and said["answers"] == "ModuleNotFoundError"
    assert said["pth"] == "OSError" and said["lesson"] == "OSError", said          # read-only
    assert not Path(sysconfig.get_paths()["purelib"], "x.pth").exists()
    assert said["net"] == "OSError" and said["tmp"] == "done", said


@pytest.mark.slow
def test_a_daemon_started_inside_bubblewrap_dies_with_it(tmp_path):
    _bwrap_or_fail()
    marker = f"mlp_ref_sandbox_daemon_{os.getpid()}"
    code = textwrap.dedent(f'''
        import os, sys, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execvp("sh", ["sh", "-c", "exec -a {marker} sleep 300"])
            os._exit(0)
        time.sleep(0.5)
        print("started", flush=True)
        time.sleep(300)
    ''')
    proc = _run_inside(code)
    assert proc.stdout.readline().strip() == "started"
    assert _with_marker(marker), "the daemon did not start: the test proves nothing"
    sandbox.end(sandbox.Isolation("bubblewrap", ""), proc)
    deadline = time.monotonic() + 10
    while _with_marker(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _with_marker(marker)


def _with_marker(marker):
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if marker.encode() in Path("/proc", entry, "cmdline").read_bytes():
                    status = Path("/proc", entry, "status").read_text()
                    if "State:\tZ" not in status:
                        found.append(int(entry))
            except OSError:
                pass
    return found


@pytest.mark.slow
def test_the_uid_fallback_kills_every_process_of_its_uid_and_cannot_signal_the_grader():
    """As root: a shell run as GRADER_UID starts a setsid daemon and tries to signal the grader;
    the signal is refused, and kill_uid leaves no process of the uid."""
    if os.geteuid() != 0:
        assert "not root" in str(sandbox.choose("user"))
        return
    marker = f"mlp_ref_uid_daemon_{os.getpid()}"
    script = (f"setsid sh -c 'exec -a {marker} sleep 300' & "
              f"kill -TERM {os.getpid()} 2>/dev/null && echo signalled || echo refused; sleep 300")
    proc = subprocess.Popen(["sh", "-c", script], preexec_fn=sandbox._as_grader_uid, cwd="/",
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "refused"
    deadline = time.monotonic() + 10
    while not _with_marker(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _with_marker(marker) and sandbox.processes_of(sandbox.GRADER_UID)
    assert sandbox.end(sandbox.Isolation("user", ""), proc) == -signal.SIGKILL
    assert not sandbox.processes_of(sandbox.GRADER_UID) and not _with_marker(marker)


@pytest.mark.slow
def test_the_grader_says_which_isolation_it_used(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "mlp_ref", "check",
                           str(ROOT / "tutorials" / "exercises" / "solutions" / "03_freeze.py")],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc
    line = proc.stderr.splitlines()[0]
    assert line.startswith("check: each file runs in a child process, isolated by ")
    assert line.endswith(str(sandbox.choose()))


def test_a_class_folder_hides_from_each_child_what_other_submissions_finds(tmp_path, monkeypatch):
    """``check DIR`` collects the folder once and hands each child the submissions to hide: the
    same as ``other_submissions`` finds for a file alone (which reads the folder anew)."""
    for name, text in {"alice_01.py": 'from helpers import h\nEXERCISE = "01_layer_backward"\n',
                       "helpers.py": "def h():\n    pass\n", "bob_01.py": 'EXERCISE = "01_layer_backward"\n',
                       "sub/carol_02.py": 'EXERCISE = "02_masked_loss"\n', "sub/dan.py": "x = 1\n"}.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    handed = {}

    def grade_file(path, *args, others=None, **kwargs):
        handed[path] = others
        return grading.Result(str(path), problem="not graded here")
    monkeypatch.setattr(grading, "grade_file", grade_file)
    grading.main([tmp_path], out=io.StringIO(), progress=io.StringIO())
    assert set(handed) == {tmp_path / n for n in ("alice_01.py", "bob_01.py", "sub/carol_02.py", "sub/dan.py")}
    for path, others in handed.items():
        assert others == grading.other_submissions(path), path
    assert {Path(o).name for o in handed[tmp_path / "sub/dan.py"]} == {"carol_02.py"}
