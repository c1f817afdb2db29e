"""Issue 38's attacks on the grader, each a hostile submission written here, graded in a child,
and asserted not to pass, not to hang, and to leave nothing behind (no file in the package or
site-packages, no process, the grader alive and its gradebook its own).

Each grades in a child process (a second or two): all but the wire's are slow.
"""
import io
import os
import subprocess
import sys
import sysconfig
import textwrap
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from mlp_ref.classroom import grading
from mlp_ref.classroom.grading import sandbox, wire

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "tutorials" / "exercises" / "solutions"
LIMIT_S = 5.0


def _bomb(inflated):
    """An npz frame whose one member, deflated, inflates to ``inflated`` bytes of zeros."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("skeleton.npy", b"")
        with z.open("a0.npy", "w", force_zip64=True) as f:
            np.lib.format.write_array_header_1_0(f, {"descr": "<u1", "fortran_order": False,
                                                     "shape": (inflated,)})
            zeros = bytes(2 ** 24)
            for _ in range(inflated // len(zeros)):
                f.write(zeros)
    return buffer.getvalue()


@pytest.mark.parametrize("inflated", [2 ** 26, pytest.param(2 ** 30, marks=pytest.mark.slow)])
def test_a_deflated_bomb_is_refused_before_it_is_inflated(inflated):
    """A frame of a thousandth of its inflated size (issue 38's: 1 MiB inflating to 1 GiB; the
    fast run's: 64 kiB to 64 MiB): refused from the zip's directory, with no more allocated
    than a few times the frame (tracemalloc's peak)."""
    import tracemalloc
    frame = _bomb(inflated)
    assert len(frame) < inflated / 500
    tracemalloc.start()
    with pytest.raises(wire.BadFrame):
        wire.decode(frame)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 4 * len(frame), peak
    # a stored member whose header declares more than it holds is refused the same way
    liar = io.BytesIO()
    with zipfile.ZipFile(liar, "w", zipfile.ZIP_STORED) as z:
        z.writestr("skeleton.npy", b"")
        body = io.BytesIO()
        np.lib.format.write_array_header_1_0(body, {"descr": "<f8", "fortran_order": False,
                                                    "shape": (2 ** 30,)})
        z.writestr("a0.npy", body.getvalue() + bytes(8))
    with pytest.raises(wire.BadFrame):
        wire.decode(liar.getvalue())


def _solution(exercise):
    return (SOLUTIONS / f"{exercise}.py").read_text()


def _grade(tmp_path, text, name="01_layer_backward.py", folder="class"):
    d = tmp_path / folder
    d.mkdir(exist_ok=True)
    os.chmod(tmp_path, 0o755)
    os.chmod(d, 0o755)
    path = d / name
    path.write_text(textwrap.dedent(text))
    started = time.monotonic()
    result = grading.grade_file(path, time_limit=LIMIT_S)
    took = time.monotonic() - started
    return result, grading.report(result), took


def _no_pass(result, text, took, functions=None):
    statuses = {v.function: v.status for v in result.verdicts}
    for f in functions or [v.function for v in result.verdicts]:
        assert statuses.get(f, "missing") != "PASS", text
    if result.problem:
        assert result.status == 2
    assert took < (LIMIT_S + 6) * (len(result.verdicts) + 2), took


#: The exercise 01 file whose sigmoid_backward is wrong unless the attack gets the answer.
WRONG_01 = _solution("01_layer_backward").replace("return da * s * (1.0 - s)", "return da * 0.0")
#: Its functions, to follow an attack's lines at the top of a file.
WRONG_BODY = "\nimport numpy as np\n\n\n" + WRONG_01[WRONG_01.index("def sigmoid(z)"):]

#: Each attack: the text of the file, the functions that must not pass.
ATTACKS = {
    "the tripwire's closure holds the original": ('''
        import numpy as np
        from mlp_ref import jacobian
        EXERCISE = "04_projection"
        def jacobian_out1(net, X):
            tw = jacobian.dense_rows
            for cell in tw.__closure__ or ():
                f = cell.cell_contents
                if callable(f) and f is not tw:
                    try:
                        return f(net, X, keep=[0])
                    except Exception:
                        pass
            raise NotImplementedError
        ''', ["jacobian_out1"]),
    "co_filename set to the package's": ('''
        import mlp_ref
        from mlp_ref import jacobian
        EXERCISE = "04_projection"
        src = "def jacobian_out1(net, X):\\n    return jacobian.dense_rows(net, X, keep=[0])\\n"
        exec(compile(src, mlp_ref.__file__, "exec"), globals())
        ''', ["jacobian_out1"]),
    "a module global of the child set to ''": ('''
        import sys
        from mlp_ref import jacobian
        EXERCISE = "04_projection"
        for m in list(sys.modules.values()):     # the child runs as __main__
            if hasattr(m, "PACKAGE_DIR"):
                m.PACKAGE_DIR = ""
        def jacobian_out1(net, X):
            return jacobian.dense_rows(net, X, keep=[0])
        ''', ["jacobian_out1"]),
    "gc.get_objects finds the original": ('''
        import gc
        EXERCISE = "04_projection"
        def jacobian_out1(net, X):
            for o in gc.get_objects():
                if getattr(o, "__name__", "") == "dense_rows" and "tripwire" not in repr(getattr(o, "__code__", "")):
                    return o(net, X, keep=[0])
            raise NotImplementedError
        ''', ["jacobian_out1"]),
    "the reference answers imported from the grading package": ('''
        EXERCISE = "04_projection"
        def gram_out1(net, X):
            from mlp_ref.classroom.grading import REFERENCES
            return REFERENCES["gram_out1"](net, X)
        def jacobian_out1(net, X):
            from mlp_ref.classroom.grading.answers import REFERENCES
            return REFERENCES["jacobian_out1"](net, X)
        ''', ["gram_out1", "jacobian_out1"]),
    "the solutions read with os.open and dir_fd": ('''
        import os
        EXERCISE = "04_projection"
        ROOT = %r
        fd = os.open(os.path.join(ROOT, "tutorials", "exercises"), os.O_RDONLY)
        src = os.read(os.open("solutions/04_projection.py", os.O_RDONLY, dir_fd=fd), 10 ** 6).decode()
        exec(src)
        ''' % str(ROOT), None),
    "the solutions read by cat in a subprocess": ('''
        import subprocess
        EXERCISE = "04_projection"
        exec(subprocess.run(["cat", %r], capture_output=True, text=True).stdout)
        ''' % str(SOLUTIONS / "04_projection.py"), None),
    "the solutions read by git show": ('''
        import subprocess
        EXERCISE = "04_projection"
        exec(subprocess.run(["git", "-C", %r, "show", "HEAD:tutorials/exercises/solutions/04_projection.py"],
                            capture_output=True, text=True).stdout)
        ''' % str(ROOT), None),
    "the solutions read through ctypes": ('''
        import ctypes
        EXERCISE = "04_projection"
        libc = ctypes.CDLL(None)
        fd = libc.open(%r.encode(), 0)
        buf = ctypes.create_string_buffer(10 ** 6)
        n = libc.read(fd, buf, 10 ** 6)
        exec(buf.raw[:n].decode())
        ''' % str(SOLUTIONS / "04_projection.py"), None),
    "the package's table of activations (ACTIVATIONS[...].df)": ('''
        from mlp_ref import activations
        EXERCISE = "01_layer_backward"
        def sigmoid_backward(da, z):
            act = activations.ACTIVATIONS["sigmoid"]
            return da * act.df(z, act.f(z))
        ''', ["sigmoid_backward"]),
    "the guard's _fetch replaced, to keep what the package is handed": ('''
        import sys
        import numpy as np
        from mlp_ref import jacobian, network
        EXERCISE = "04_projection"
        kept = {}
        main = next(m for m in list(sys.modules.values()) if hasattr(m, "_fetch"))
        real = main._fetch
        def spy(name):
            kept[name] = f = real(name)
            return f
        def forge(name):
            try:
                sys.audit("mlp_ref.trip", name)
            except BaseException as exc:
                if exc.args and callable(exc.args[0]):
                    kept[name] = exc.args[0]
                    return exc.args[0]
                raise
        def jacobian_out1(net, X):
            for fake in (spy, forge):
                main._fetch = fake
                try:
                    net.gradient(X, np.ones((len(X), net.sizes[-1])))
                except BaseException:
                    pass
                try:
                    fake.__code__ = real.__code__
                except BaseException:
                    pass
            f = kept.get("jacobian.dense_rows") or jacobian.dense_rows
            return f(net, X, keep=[0])
        ''', ["jacobian_out1"]),
    "a thread that reads the solutions while the guard looks at the stack": ('''
        import threading
        EXERCISE = "04_projection"
        got = []
        def read():
            for _ in range(10000):
                try:
                    got.append(open(%r).read())
                    return
                except OSError:
                    pass
        thread = threading.Thread(target=read)
        thread.start()
        thread.join()
        exec(got[0])
        ''' % str(SOLUTIONS / "04_projection.py"), None),
    "a classmate's file imported from the same folder": ('''
        EXERCISE = "01_layer_backward"
        from alice_01 import sigmoid_backward, affine_backward, two_layer_backward
        ''', None),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", ATTACKS)
def test_an_attack_does_not_pass(name, tmp_path):
    text, functions = ATTACKS[name]
    if name.startswith("a classmate"):
        (tmp_path / "class").mkdir()
        (tmp_path / "class" / "alice_01.py").write_text(_solution("01_layer_backward"))
    result, report, took = _grade(tmp_path, text, name="bob.py")
    assert "All done" not in report, report
    _no_pass(result, report, took, functions)
    # nothing left behind: in the class folder, or as a process (site-packages: the file test)
    assert sorted(p.name for p in (tmp_path / "class").iterdir()) == sorted(
        ["bob.py"] + (["alice_01.py"] if name.startswith("a classmate") else []))
    assert not sandbox.processes_of(sandbox.GRADER_UID)


def _site_packages():
    return Path(sysconfig.get_paths()["purelib"])


@pytest.mark.slow
def test_files_written_anywhere_but_its_own_folder_stay_out_and_nothing_persists(tmp_path):
    """A .pth into site-packages, a file into the package's resources, an os.rename of the
    grading package's code, a file beside itself, /proc/<grader>/mem: none lands; the next
    student's wrong file still fails."""
    pth = _site_packages() / "zz_mlp_ref_attack.pth"
    target = Path(grading.__file__).with_name("answers.py")
    before = target.read_bytes()
    text = f'''
        import os
        EXERCISE = "01_layer_backward"
        def attempt(f):
            try:
                f()
            except BaseException:
                pass
        attempt(lambda: open({str(pth)!r}, "w").write("import os; os.environ['X'] = '1'\\n"))
        attempt(lambda: open({str(ROOT / "mlp_ref" / "resources" / "planted.txt")!r}, "w").write("x"))
        attempt(lambda: os.rename({str(target)!r}, {str(target) + ".bak"!r}))
        attempt(lambda: open(os.path.join(os.path.dirname(__file__), "planted.txt"), "w").write("x"))
        attempt(lambda: open("/proc/%d/mem", "r+b"))
    ''' % os.getpid()
    planted = ROOT / "mlp_ref" / "resources" / "planted.txt"
    try:
        result, report, took = _grade(tmp_path, textwrap.dedent(text) + WRONG_BODY)
        landed = [pth.exists(), target.read_bytes() != before if target.exists() else True,
                  planted.exists(), (tmp_path / "class" / "planted.txt").exists(),
                  Path(str(target) + ".bak").exists()]
    finally:                                      # a failure must not leave the machine changed
        pth.unlink(missing_ok=True)
        planted.unlink(missing_ok=True)
        if Path(str(target) + ".bak").exists() and not target.exists():
            os.rename(str(target) + ".bak", target)
    assert landed == [False] * 5, landed
    assert result.verdicts[0].function == "sigmoid_backward" and result.verdicts[0].status == "FAIL", report


@pytest.mark.slow
@pytest.mark.parametrize("sig", ["SIGSTOP", "SIGTERM", "SIGUSR1", "SIGINT"])
def test_a_signal_to_the_grader_does_not_reach_it(sig, tmp_path):
    """os.kill(os.getppid(), sig) at import and in a function: the grader, a separate process
    here, goes on and reports; it is neither stopped, nor killed, nor interrupted."""
    folder = tmp_path / "class"
    folder.mkdir()
    os.chmod(tmp_path, 0o755)
    (folder / "mallory_01.py").write_text(textwrap.dedent(f'''
        import os, signal
        EXERCISE = "01_layer_backward"
        for pid in {{os.getppid(), os.getpgrp(), 1}}:
            for target in (pid, -pid):
                try:
                    os.kill(target, signal.{sig})
                except BaseException:
                    pass
        ''') + WRONG_BODY)
    proc = subprocess.run([sys.executable, "-m", "mlp_ref", "check", "--time-limit", "5",
                           str(folder / "mallory_01.py")], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 1, proc
    assert "sigmoid_backward    FAIL" in proc.stdout and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_a_double_forked_daemon_is_gone_when_its_file_is_done(tmp_path):
    """A setsid daemon started (where a child may start processes at all) to rewrite the
    gradebook after the grader exits: no process of it is left, the gradebook is the grader's."""
    book = tmp_path / "book.csv"
    marker = f"mlp_ref_daemon_{os.getpid()}"
    text = f'''
        import os, time
        EXERCISE = "01_layer_backward"
        try:
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    import sys
                    sys.argv[0] = {marker!r}
                    for _ in range(300):
                        try:
                            open({str(book)!r}, "w").write("all PASS\\n")
                        except OSError:
                            pass
                        time.sleep(0.1)
                os._exit(0)
        except BaseException:
            pass
    '''
    folder = tmp_path / "class"
    folder.mkdir()
    os.chmod(tmp_path, 0o755)
    (folder / "mallory_01.py").write_text(textwrap.dedent(text) + WRONG_BODY)
    status = grading.main([folder], out=io.StringIO(), progress=io.StringIO(), gradebook=book,
                          time_limit=LIMIT_S)
    assert status == 1
    first = book.read_text()
    time.sleep(1.5)
    assert book.read_text() == first and "all PASS" not in first
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path("/proc", entry, "cmdline").read_bytes()
            except OSError:
                continue
            assert b"mallory_01" not in cmdline and marker.encode() not in cmdline


@pytest.mark.slow
def test_the_stand_in_child_cannot_leak_through_file_names(tmp_path):
    """The child that meets the reference's answers (a stand-in) writes them into a file's name:
    under bubblewrap its folders are private tmpfs, gone with it; elsewhere it may write no file."""
    leak_dir = tmp_path / "leak"
    leak_dir.mkdir()
    os.chmod(leak_dir, 0o777)
    call = 'stages["dz1"] = sigmoid_backward(stages["da1"], z1)'
    text = WRONG_01.replace(call, call + f'''
    for d in ({str(leak_dir)!r}, "/tmp", "."):
        try:
            open(os.path.join(d, "leak_" + "_".join("%.3g" % v for v in stages["dz1"].ravel()[:4])), "w").close()
        except BaseException:
            pass''').replace("import numpy as np", "import os\nimport numpy as np", 1)
    result, report, took = _grade(tmp_path, text)
    assert list(leak_dir.iterdir()) == [] and not list(Path("/tmp").glob("leak_*"))


@pytest.mark.slow
def test_a_valid_file_reads_data_beside_itself_through_a_relative_path(tmp_path, monkeypatch):
    """__file__ is absolute in the child: a file graded by a relative path reads its data."""
    folder = tmp_path / "class"
    folder.mkdir()
    os.chmod(tmp_path, 0o755)
    np.save(folder / "scale.npy", np.array([1.0]))
    for path in (folder, folder / "scale.npy"):   # a class folder, readable by all
        os.chmod(path, 0o755)
    text = _solution("01_layer_backward").replace(
        'EXERCISE = "01_layer_backward"', 'EXERCISE = "01_layer_backward"\nimport os\n'
        'ONE = float(np.load(os.path.join(os.path.dirname(__file__), "scale.npy"))[0])', 1).replace(
        "return da * s * (1.0 - s)", "return ONE * da * s * (1.0 - s)")
    assert "ONE * da" in text
    (folder / "01_layer_backward.py").write_text(text)
    monkeypatch.chdir(tmp_path)
    result = grading.grade_file(Path("class") / "01_layer_backward.py", time_limit=30)
    assert result.status == 0, grading.report(result)


@pytest.mark.slow
def test_a_child_that_closes_its_pipes_is_not_reported_as_killed(tmp_path):
    text = '''
        import os
        EXERCISE = "01_layer_backward"
        def sigmoid_backward(da, z):
            for fd in range(3, 64):
                try:
                    os.close(fd)
                except OSError:
                    pass
            import time
            time.sleep(60)
    '''
    result, report, took = _grade(tmp_path, text)
    line = next(v for v in result.verdicts if v.function == "sigmoid_backward")
    assert "SIGKILL" not in line.what and "closed its channel to the grader" in line.what, report
    assert took < 40


@pytest.mark.slow
def test_a_read_only_argument_is_not_written_into_by_a_stand_in(tmp_path):
    """Issue 38's false blame: a right two_layer_backward passing np.broadcast_to(...) (read-only)
    to its wrong sigmoid_backward is graded again with ours standing in: it passes."""
    text = _solution("01_layer_backward").replace("return da * s * (1.0 - s)", "return da * s * (s - 1.0)")
    right = 'stages["dz1"] = sigmoid_backward(stages["da1"], z1)'
    assert text.count(right) == 1
    text = text.replace(right, 'stages["dz1"] = sigmoid_backward(np.broadcast_to(stages["da1"], '
                               'stages["da1"].shape), np.broadcast_to(z1, z1.shape))')
    result, report, took = _grade(tmp_path, text)
    verdicts = {v.function: v for v in result.verdicts}
    assert verdicts["sigmoid_backward"].status == "FAIL"
    assert verdicts["two_layer_backward"].status == "PASS", report
    assert "passes with our sigmoid_backward" in report and "read-only" not in report


@pytest.mark.slow
def test_python_m_from_a_class_folder_does_not_run_a_students_numpy(tmp_path):
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "numpy.py").write_text("raise SystemExit('the student numpy ran as the grader')\n")
    (folder / "alice_01.py").write_text(_solution("01_layer_backward"))
    proc = subprocess.run([sys.executable, "-m", "mlp_ref", "check", "alice_01.py"], cwd=folder,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0 and "All done." in proc.stdout, proc
    # a student's mlp_ref.py there would be run by `python -m mlp_ref` itself, before any line of
    # ours (Python's rule): -P keeps it out, and the grader started elsewhere warns of it
    (folder / "mlp_ref.py").write_text("raise SystemExit('the student mlp_ref ran as the grader')\n")
    safe = subprocess.run([sys.executable, "-P", "-m", "mlp_ref", "check", "alice_01.py"], cwd=folder,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert safe.returncode == 0 and "All done." in safe.stdout, safe
    told = subprocess.run([sys.executable, "-m", "mlp_ref", "check", str(folder)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    # ... and grades them as what they are: files with no exercise, scored 0 (exit 2: not every
    # file could be graded), alice's file beside them unharmed
    assert told.returncode == 2 and f"{folder / 'alice_01.py'}: 01_layer_backward: 5 of 5 pass" in told.stdout, told
    for name in ("mlp_ref.py", "numpy.py"):
        assert f"check: {folder / name}: `python -m mlp_ref` started in its folder would run it " \
               f"in place of the grader" in told.stderr, told.stderr


@pytest.mark.slow
def test_the_isolation_is_named_and_is_bubblewrap_where_it_starts():
    """CI installs bubblewrap (.ci/run): there, as here, the child runs in it."""
    chosen = sandbox.choose()
    assert chosen.kind in ("bubblewrap", "user", "none") and str(chosen)
    if not os.environ.get("MLP_REF_SANDBOX") and (os.environ.get("CI") or sandbox._probe_bwrap() is None):
        assert chosen.kind == "bubblewrap", chosen


@pytest.mark.slow
def test_grading_leaves_no_folder_behind(tmp_path, monkeypatch):
    import tempfile
    sandbox.lesson_view()                         # one per grader, removed at its exit
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    _grade(tmp_path, WRONG_01)
    assert list(temp.iterdir()) == []


@pytest.mark.slow
def test_a_bomb_sent_on_the_channel_is_refused_and_the_grader_stays_small(tmp_path):
    """The child writes, as its answer, a 256 kiB frame whose member inflates to 256 MiB: the
    grader says it is not an answer, and its own peak memory does not grow by the inflated size."""
    import resource
    text = '''
        import io, struct, sys, zipfile
        import numpy as np
        EXERCISE = "01_layer_backward"
        def sigmoid_backward(da, z):
            buffer = io.BytesIO()
            with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
                archive.writestr("skeleton.npy", b"")
                with archive.open("a0.npy", "w", force_zip64=True) as f:
                    np.lib.format.write_array_header_1_0(
                        f, {"descr": "<u1", "fortran_order": False, "shape": (2 ** 28,)})
                    for _ in range(16):
                        f.write(bytes(2 ** 24))
            frame = buffer.getvalue()
            fd = int(sys.argv[-1])
            data = struct.pack("<Q", len(frame)) + frame
            while data:
                data = data[__import__("os").write(fd, data):]
            import time
            time.sleep(30)
    '''
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    result, report, took = _grade(tmp_path, text)
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    verdict = result.verdicts[0]
    assert verdict.status == "ERROR" and "not an answer" in verdict.what, report
    assert grown < 2 ** 27, grown                 # half the inflated size: it was never inflated
