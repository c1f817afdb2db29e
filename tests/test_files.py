"""Every file the package writes appears whole or not at all: a saved network, a figure (PNG, SVG,
PDF), the bench JSON. A child process is stopped in the middle of a write (its writer slowed down
after half a file) by SIGTERM, SIGINT or SIGKILL; the target must hold its old bytes and no
temporary file may stay behind (after SIGKILL: until the next write of any file into that folder).
A writer that is alive keeps its temporary file, whatever process id it shows (containers sharing
a folder see each other's process ids as foreign)."""
import contextlib
import errno
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import pytest
from _nets import net342, same_network

import mlp_ref as mr
from mlp_ref.classroom import cli, figures
from mlp_ref.files import atomic

ROOT = Path(__file__).resolve().parents[1]

# the writers, each slowed down: half a file is written and flushed, then the child waits
SLOW_SAVE = """
import time, numpy as np, mlp_ref as mr
def slow(f, **arrays):
    f.write(b"PK\\x03\\x04 half a file"); f.flush()
    print("writing", flush=True); time.sleep(60)
np.savez = slow
mr.MLP([3, 4, 2], seed=2).save(TARGET)
"""
SLOW_FIGURE = """
import sys, time, matplotlib.figure
def slow(self, f, **kw):
    f.write(b"\\x89PNG half a figure"); f.flush()
    print("writing", flush=True); time.sleep(60)
matplotlib.figure.Figure.savefig = slow
from mlp_ref.classroom import cli
sys.exit(cli.main(["figures", "--out", FOLDER, "--only", "projection_cost"]))
"""
SLOW_JSON = """
import time
from mlp_ref.files import atomic
def slow(f):
    f.write(b'{"half": '); f.flush()
    print("writing", flush=True); time.sleep(60)
atomic.write_atomically("--json", TARGET, slow)
"""
#: more than Linux's PID_MAX_LIMIT (2**22): no process here has it, as a writer in another PID
#: namespace seen from this one
FOREIGN_PID = 2 ** 22 + 1
# a writer whose process id is foreign here, paused after half a file until a line comes on stdin
FOREIGN_SAVE = f"""
import os, sys, numpy as np, mlp_ref as mr
os.getpid = lambda: {FOREIGN_PID}
savez = np.savez
def paused(f, **arrays):
    f.write(b"PK\\x03\\x04 half a file"); f.flush()
    print("writing", flush=True); sys.stdin.readline()
    f.seek(0); f.truncate(); savez(f, **arrays)
np.savez = paused
mr.MLP([3, 4, 2], seed=2).save(TARGET)
print("saved", flush=True)
"""


@contextlib.contextmanager
def writing(script, target):
    """A child running ``script`` (TARGET, FOLDER set to the target and its folder), yielded once
    it has written half a file (it prints "writing"); killed on leaving if it still runs."""
    env = dict(os.environ, MPLBACKEND="Agg",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    head = f"TARGET = {str(target)!r}\nFOLDER = {str(target.parent)!r}\n"
    child = subprocess.Popen([sys.executable, "-c", head + textwrap.dedent(script)], env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        for line in child.stdout:                # (a command may print its header first)
            if line == "writing\n":
                break
        else:
            raise AssertionError(child.stderr.read())
        yield child
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate()


def interrupt(script, target, sig):
    """Run ``script`` in a child (``writing``), send ``sig`` once it has written half a file, and
    return (exit status, stderr, the temporary files that existed mid-write)."""
    with writing(script, target) as child:
        during = atomic.temp_files(target)
        child.send_signal(sig)
        _, err = child.communicate(timeout=60)
    return child.returncode, err, during


#: each case a child process (its startup costs CPU): the fast suite runs one, the slow suite both
SIGNALS = [signal.SIGTERM, pytest.param(signal.SIGINT, marks=pytest.mark.slow)]


@pytest.mark.parametrize("sig", SIGNALS)
def test_a_save_stopped_mid_write_leaves_the_old_file_and_no_temporary(tmp_path, sig):
    path = tmp_path / "net.npz"
    old = net342(seed=1)
    old.save(path)
    before = path.read_bytes()
    code, err, during = interrupt(SLOW_SAVE, path, sig)
    assert len(during) == 1                      # the half-written file existed, under another name
    assert code == (128 + signal.SIGTERM if sig == signal.SIGTERM else -signal.SIGINT), err
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["net.npz"]
    same_network(mr.MLP.load(path), old)


@pytest.mark.parametrize("script", [SLOW_SAVE, pytest.param(FOREIGN_SAVE, marks=pytest.mark.slow)],
                         ids=["own-pid", "foreign-pid"])
def test_a_killed_save_leaves_a_temporary_that_the_next_write_into_its_folder_removes(tmp_path, script):
    path = tmp_path / "net.npz"
    code, _, during = interrupt(script, path, signal.SIGKILL)
    assert code == -signal.SIGKILL and not path.exists()
    assert atomic.temp_files(path) == during and len(during) == 1   # SIGKILL: nothing can run
    # files that only look alike are not ours: kept
    alike = [".net.npz.tmp", f".net.npz.{os.getpid()}.tmp", "net.npz.1.tmp"]
    for name in alike:
        (tmp_path / name).write_bytes(b"x")
    net342(seed=3).save(tmp_path / "other.npz")         # another target, in the same folder
    assert sorted(os.listdir(tmp_path)) == sorted(["other.npz", *alike])
    same_network(mr.MLP.load(tmp_path / "other.npz"), net342(seed=3))


def test_a_live_writer_keeps_its_temporary_file_whatever_process_id_it_shows(tmp_path):
    """Its process id names no process here (another PID namespace): while it writes, the saves
    of this process into the same folder, of its target and of another, leave its file alone,
    and its own save then completes."""
    path = tmp_path / "net.npz"
    with writing(FOREIGN_SAVE, path) as child:
        live = atomic.temp_files(path)
        assert len(live) == 1 and f".{FOREIGN_PID}." in os.path.basename(live[0])
        net342(seed=3).save(path)
        net342(seed=4).save(tmp_path / "other.npz")
        assert atomic.temp_files(path) == live
        out, err = child.communicate("go on\n", timeout=60)
        assert (child.returncode, out) == (0, "saved\n"), err
    same_network(mr.MLP.load(path), net342(seed=2))     # the live writer's save, the last one
    assert sorted(os.listdir(tmp_path)) == ["net.npz", "other.npz"]


CONCURRENT_SAVES = """
import os, sys, mlp_ref as mr
os.getpid = lambda: int(sys.argv[1])
net = mr.MLP([3, 4, 2], seed=int(sys.argv[1]) % 1000)
for i in range(int(sys.argv[2])):
    net.save(os.path.join(FOLDER, "shared.npz"))
    net.save(os.path.join(FOLDER, f"own{sys.argv[1]}.npz"))
"""


def test_writers_with_foreign_process_ids_into_one_folder_all_succeed(tmp_path):
    """Each writer's cleanup runs beside the other's writes, on its own target and on the shared
    one: no save fails (a cleanup that took a live file for stale would fail the other's rename)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    script = f"FOLDER = {str(tmp_path)!r}\n" + CONCURRENT_SAVES
    children = [subprocess.Popen([sys.executable, "-c", script, str(pid), "40"], env=env,
                                 stderr=subprocess.PIPE, text=True)
                for pid in (FOREIGN_PID, FOREIGN_PID + 1)]
    errors = [child.communicate(timeout=120)[1] for child in children]
    assert [child.returncode for child in children] == [0, 0], errors
    assert sorted(os.listdir(tmp_path)) == sorted(["shared.npz", f"own{FOREIGN_PID}.npz",
                                                   f"own{FOREIGN_PID + 1}.npz"])


# Ctrl-C in every command: each child's work is replaced by a quick stand-in (the subject is the
# interruption, not the work), and the write pauses after its bytes are in the temporary file and
# before the rename (os.fsync), or inside the figure's savefig: there SIGINT comes
PAUSE_AT_FSYNC = """
import os, time
def paused(fd):
    print("writing", flush=True); time.sleep(60)
os.fsync = paused
"""
PAUSE_IN_TABLE = """
import time
from mlp_ref.measurements import table
def paused(**kwargs):
    print("writing", flush=True); time.sleep(60)
table.question_table = paused
"""
STAND_INS = {
    "animate": "from mlp_ref.classroom import animations\nanimations.gif = lambda name: (b'GIF89a new', 1)",
    "explore": "from mlp_ref.classroom import explorable\nexplorable.page_data = lambda grid, log=None: {}",
    "slides": ("from mlp_ref.classroom import deck\nimport mlp_ref.plots.slides as drawing\n"
               "deck.draw = lambda log=None: []\ndrawing.write_pdf = lambda f, drawn, meta: f.write(b'%PDF-new')"),
    "continual-table": ("from mlp_ref.measurements import permuted\npermuted.run = lambda log, **kw: None\n"
                        "permuted.as_json = lambda result: {'new': 1}\npermuted.format_table = lambda result: 'new'"),
    "bench": "from mlp_ref.fast import bench\nbench.run = lambda **kw: {}\nbench.format_table = lambda r: 'new'",
}
#: command -> (the script its child runs, its argv, the file it writes (None: it writes none))
CTRL_C = {
    "figures": (SLOW_FIGURE, None, "projection_cost.png"),
    "animate": (PAUSE_AT_FSYNC + STAND_INS["animate"], ["animate", "--out", "FOLDER"], "backprop.gif"),
    "explore": (PAUSE_AT_FSYNC + STAND_INS["explore"], ["explore", "--html", "TARGET"], "page.html"),
    "slides": (PAUSE_AT_FSYNC + STAND_INS["slides"], ["slides", "--out", "TARGET"], "deck.pdf"),
    "continual-table": (PAUSE_AT_FSYNC + STAND_INS["continual-table"], ["continual-table", "--json", "TARGET"],
                        "table.json"),
    "bench": (PAUSE_AT_FSYNC + STAND_INS["bench"], ["bench", "--json", "TARGET"], "bench.json"),
    "table": (PAUSE_IN_TABLE, ["table"], None),
}


#: the fast suite interrupts one of them (a child each: startup costs CPU), the slow suite the rest
FAST_CTRL_C = ("table",)


@pytest.mark.parametrize("command", [c if c in FAST_CTRL_C else pytest.param(c, marks=pytest.mark.slow)
                                     for c in CTRL_C])
def test_ctrl_c_in_any_command_is_one_line_status_130_and_the_old_file_intact(tmp_path, command):
    """As figures and check end: no traceback, one line saying the command was interrupted,
    exit status 130, the file it was writing as it was, and no temporary file left."""
    script, argv, written = CTRL_C[command]
    if argv is not None:
        script += ("\nimport sys\nfrom mlp_ref.classroom import cli\n"
                   f"sys.exit(cli.main([{', '.join(a if a in ('TARGET', 'FOLDER') else repr(a) for a in argv)}]))\n")
    path = tmp_path / (written or "untouched")
    path.write_bytes(b"the old file")
    code, err, during = interrupt(script, path, signal.SIGINT)
    assert len(during) == (written is not None)          # SIGINT came during the write
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 130 and "Traceback" not in err and len(lines) == 1, err
    assert lines[0].startswith(f"{command}: ") and "interrupted" in lines[0], err
    assert path.read_bytes() == b"the old file" and os.listdir(tmp_path) == [path.name]


# Ctrl-C that lands in a finalizer (a weakref callback of the garbage collector, a __del__): Python
# reports it as "Exception ignored" and goes on, so the command would finish and exit 0
CTRL_C_IN_A_FINALIZER = """
import sys, time
from mlp_ref.measurements import table
class Collected:
    def __del__(self):
        print("writing", flush=True); time.sleep(60)
def work(**kwargs):
    Collected()                    # collected at once: SIGINT comes inside its __del__
    time.sleep(30)                 # the rest of the work, which Ctrl-C must not wait for
table.question_table = work
from mlp_ref.classroom import cli
sys.exit(cli.main(["table"]))
"""


@pytest.mark.slow
def test_ctrl_c_that_lands_in_a_finalizer_still_stops_the_command(tmp_path):
    code, err, _ = interrupt(CTRL_C_IN_A_FINALIZER, tmp_path / "untouched", signal.SIGINT)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 130 and len(lines) == 1 and lines[0].startswith("table: "), err


@pytest.mark.slow                 # a command in a child process, and another: CPU for its startups
def test_a_killed_figures_run_is_cleaned_up_by_the_next_run_of_any_figure(tmp_path):
    path = tmp_path / "projection_cost.png"
    code, _, during = interrupt(SLOW_FIGURE, path, signal.SIGKILL)
    assert code == -signal.SIGKILL and len(during) == 1 and os.listdir(tmp_path) == [os.path.basename(during[0])]
    assert cli.main(["figures", "--out", str(tmp_path), "--only", "seed_problem"]) == 0
    assert os.listdir(tmp_path) == ["seed_problem.png"]


@pytest.mark.parametrize("sig", SIGNALS)
def test_a_json_write_stopped_mid_write_leaves_nothing(tmp_path, sig):
    path = tmp_path / "bench.json"
    code, err, during = interrupt(SLOW_JSON, path, sig)
    assert len(during) == 1 and code != 0
    assert os.listdir(tmp_path) == []


@pytest.mark.slow           # four figures drawn: 1.3 CPU s of the fast suite's 30
@pytest.mark.parametrize("fmt, magic", [("svg", b"<?xml"), ("pdf", b"%PDF-")])
def test_figures_as_svg_and_pdf_for_slides_are_byte_identical_from_run_to_run(tmp_path, fmt, magic):
    a, b = tmp_path / "a", tmp_path / "b"
    for out in (a, b):
        assert cli.main(["figures", "--out", str(out), "--only", "projection_cost.png",
                         "--format", fmt]) == 0
    assert os.listdir(a) == [f"projection_cost.{fmt}"]
    data = (a / f"projection_cost.{fmt}").read_bytes()
    assert data.startswith(magic) and data == (b / f"projection_cost.{fmt}").read_bytes()
    assert figures.png_metadata()["Software"].encode() in data


def test_figures_refuse_an_unknown_format(tmp_path, capsys):
    with pytest.raises(SystemExit):
        cli.main(["figures", "--out", str(tmp_path), "--format", "jpg"])
    assert "--format" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"^fmt: expected one of png, svg, pdf, got 'jpg'"):
        figures.write_all(str(tmp_path), names=["pareto.png"], fmt="jpg")
    assert os.listdir(tmp_path) == []


# -- a target that cannot be written is named as the caller's argument, not a temporary file ----
def test_save_into_a_folder_or_under_a_file_names_path(tmp_path):
    net = net342()
    (tmp_path / "file").write_bytes(b"x")
    cases = [(tmp_path, IsADirectoryError, r"^path: .* is a folder"),
             (tmp_path / "file" / "net.npz", NotADirectoryError, r"^path: .*file.* is a file, not a folder"),
             (tmp_path / "no" / "net.npz", FileNotFoundError, r"^path: folder .* does not exist")]
    for target, exc, pattern in cases:
        with pytest.raises(exc, match=pattern) as info:
            net.save(target)
        assert ".tmp" not in str(info.value)
    assert sorted(os.listdir(tmp_path)) == ["file"]


def as_unprivileged(check):
    """``check()`` as this user, or, as root (who writes anywhere), in a forked child that drops to the
    user nobody first, as tests/test_door.py's children do: whether it returned True."""
    if os.geteuid() != 0:
        return check()
    pid = os.fork()
    if pid == 0:                                  # the child: leaves by os._exit, never into pytest
        code = 2
        try:
            os.setgid(65534)
            os.setuid(65534)
            code = 0 if check() else 1
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def test_save_into_a_read_only_folder_names_path():
    base = Path(tempfile.mkdtemp(prefix="mlp-ref-ro-"))          # reachable by every user
    folder, net = base / "ro", net342()

    def refused():
        try:
            net.save(folder / "net.npz")
        except PermissionError as exc:
            return bool(re.match(r"^path: folder .* is not writable", str(exc))) and os.listdir(folder) == []
        return False

    try:
        base.chmod(0o755)
        folder.mkdir()
        folder.chmod(0o555)
        assert as_unprivileged(refused)
    finally:
        folder.chmod(0o755)
        shutil.rmtree(base)


def test_load_refuses_a_fifo_and_a_folder_without_blocking(tmp_path):
    fifo = tmp_path / "pipe.npz"
    os.mkfifo(fifo)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    with pytest.raises(ValueError, match=r"^path: .*pipe.npz' is not a regular file"):
        mr.MLP.load(fifo)                      # open() would wait forever for a writer
    with pytest.raises(ValueError, match=r"^path: .* is a folder"):
        mr.MLP.load(tmp_path)


def test_bench_json_is_written_whole_through_the_shared_helper(tmp_path):
    path = tmp_path / "out.json"
    path.write_text("old")
    data = np.arange(3).tobytes()
    assert atomic.write_atomically("--json", path, lambda f: f.write(data)) == str(path)
    assert path.read_bytes() == data and os.listdir(tmp_path) == ["out.json"]


# -- what a target may be: a regular file is replaced, a symlink followed, a device written in
# place; a FIFO, a socket or a folder refused, and so is a name past the file system's NAME_MAX --
def _writers(target):
    """Each writer of the package once on ``target``: (its argument's name, the write)."""
    return [("--json", lambda: atomic.write_atomically("--json", target, lambda f: f.write(b'{"new": 1}'))),
            ("path", lambda: net342(seed=5).save(target))]


def _special(tmp_path, kind):
    """A FIFO, a socket, or a symlink to a FIFO in ``tmp_path``: (its path, the test of its kind)."""
    if kind == "socket":
        import socket
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(tmp_path / "sock"))
        sock.close()                               # the socket file stays
        return tmp_path / "sock", stat.S_ISSOCK
    os.mkfifo(tmp_path / "fifo")
    if kind == "fifo":
        return tmp_path / "fifo", stat.S_ISFIFO
    os.symlink("fifo", tmp_path / "link")
    return tmp_path / "link", stat.S_ISFIFO


@pytest.mark.parametrize("kind", ["fifo", "socket", "symlink to a fifo"])
def test_a_fifo_or_a_socket_is_refused_not_replaced(tmp_path, kind):
    target, is_kind = _special(tmp_path, kind)
    before = sorted(os.listdir(tmp_path))
    for name, write in _writers(target):
        with pytest.raises(OSError) as info:
            write()
        assert info.value.argument == name and str(info.value).startswith(f"{name}: "), info.value
        assert is_kind(os.stat(target).st_mode) and sorted(os.listdir(tmp_path)) == before
    assert atomic.check_target("--json", tmp_path / "other.json") == str(tmp_path / "other.json")


def test_a_symlink_is_followed_and_stays_a_link_to_the_new_file(tmp_path):
    (tmp_path / "real").mkdir()
    real = tmp_path / "real" / "net.npz"
    net342(seed=1).save(real)
    os.symlink(real, tmp_path / "first")
    os.symlink("first", tmp_path / "second")                     # a chain of two links
    os.symlink("real/new.npz", tmp_path / "dangling")             # to a file not written yet
    net342(seed=2).save(tmp_path / "second")
    net342(seed=3).save(tmp_path / "dangling")
    assert os.readlink(tmp_path / "second") == "first" and os.readlink(tmp_path / "first") == str(real)
    assert os.readlink(tmp_path / "dangling") == "real/new.npz"
    same_network(mr.MLP.load(real), net342(seed=2))
    same_network(mr.MLP.load(tmp_path / "real" / "new.npz"), net342(seed=3))
    assert sorted(os.listdir(tmp_path / "real")) == ["net.npz", "new.npz"]
    # a link to a folder that does not exist, or a loop: refused, naming the link
    os.symlink("nowhere/x.npz", tmp_path / "lost")
    os.symlink("loop", tmp_path / "loop")
    for link in ("lost", "loop"):
        with pytest.raises(OSError, match=rf"^path: '.*{link}'") as info:
            net342().save(tmp_path / link)
        assert info.value.argument == "path" and os.path.islink(tmp_path / link)


def _device(tmp_path, name, minor):
    """A character device of the kernel's memory driver (major 1): /dev/null (minor 3) or
    /dev/full (7). As root, who could replace the system's own, a node of our own in
    ``tmp_path``; otherwise the system's (which such a user cannot replace)."""
    if os.geteuid() != 0:
        return Path(f"/dev/{name}")
    node = tmp_path / name
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, minor))
    except PermissionError:
        pytest.skip("root without CAP_MKNOD: no device node of our own to write")
    return node


def test_a_character_device_is_written_in_place_and_stays_a_device(tmp_path):
    # the decision alone, on the system's /dev/null: written in place (nothing is written here)
    assert atomic.target("--json", "/dev/null") == ("/dev/null", True)
    null = _device(tmp_path, "null", 3)
    os.symlink(null, tmp_path / "to_null")
    before = os.stat(null)
    for target in (null, tmp_path / "to_null"):
        for _, write in _writers(target):
            write()
            after = os.stat(null)
            assert stat.S_ISCHR(after.st_mode) and (after.st_ino, after.st_rdev) == (before.st_ino, before.st_rdev)
    assert os.path.islink(tmp_path / "to_null")
    assert atomic.temp_files(null) == [] and atomic.temp_files(tmp_path / "to_null") == []
    # a full device is a full disk: WriteError, and the device stays
    full = _device(tmp_path, "full", 7)
    for name, write in _writers(full):
        with pytest.raises(atomic.WriteError) as info:
            write()
        assert (info.value.argument, info.value.errno) == (name, errno.ENOSPC)
        assert stat.S_ISCHR(os.stat(full).st_mode)


def test_a_name_past_name_max_is_refused_and_one_at_it_is_written(tmp_path):
    name_max = os.pathconf(tmp_path, "PC_NAME_MAX")
    at_limit = tmp_path / ("n" * (name_max - 4) + ".npz")
    net342(seed=4).save(at_limit)              # its temporary name is longer: cut to fit
    same_network(mr.MLP.load(at_limit), net342(seed=4))
    assert os.listdir(tmp_path) == [at_limit.name]
    for target in (tmp_path / ("n" * (name_max - 3) + ".npz"),
                   tmp_path / ("d" * (name_max + 1)) / "net.npz"):
        for name, write in _writers(target):
            with pytest.raises(OSError) as info:
                write()
            assert (info.value.argument, info.value.errno) == (name, errno.ENAMETOOLONG)
            assert str(name_max) in str(info.value) and ".tmp" not in str(info.value)
    assert os.listdir(tmp_path) == [at_limit.name]
