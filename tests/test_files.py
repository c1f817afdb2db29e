"""Every file the package writes appears whole or not at all: a saved network, a figure (PNG, SVG,
PDF), the bench JSON. A child process is stopped in the middle of a write (its writer slowed down
after half a file) by SIGTERM, SIGINT or SIGKILL; the target must hold its old bytes and no
temporary file may stay behind (after SIGKILL: until the next write of the same target)."""
import os
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import mlp_ref as mr
from mlp_ref import _files, cli, figures

from _nets import net342, same_network

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
from mlp_ref import cli
sys.exit(cli.main(["figures", "--out", FOLDER, "--only", "projection_cost"]))
"""
SLOW_JSON = """
import time
from mlp_ref import _files
def slow(f):
    f.write(b'{"half": '); f.flush()
    print("writing", flush=True); time.sleep(60)
_files.write_atomically("--json", TARGET, slow)
"""


def interrupt(script, target, sig):
    """Run ``script`` (TARGET, FOLDER set to the target and its folder) in a child, send ``sig``
    once it has written half a file, and return (exit status, stderr, the temporary files that
    existed mid-write)."""
    env = dict(os.environ, MPLBACKEND="Agg",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    head = f"TARGET = {str(target)!r}\nFOLDER = {str(target.parent)!r}\n"
    child = subprocess.Popen([sys.executable, "-c", head + textwrap.dedent(script)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "writing\n", child.stderr.read()
        during = _files.temp_files(target)
        child.send_signal(sig)
        _, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return child.returncode, err, during


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
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


def test_a_killed_save_leaves_a_temporary_that_the_next_save_removes(tmp_path):
    path = tmp_path / "net.npz"
    code, _, during = interrupt(SLOW_SAVE, path, signal.SIGKILL)
    assert code == -signal.SIGKILL and not path.exists()
    assert _files.temp_files(path) == during and len(during) == 1   # SIGKILL: nothing can run
    # a temporary file of another target, and one of a live writer (this process), are kept
    other = tmp_path / f".other.npz.{os.getpid() + 1}.{'0' * 32}.tmp"
    live = tmp_path / f".net.npz.{os.getpid()}.{'1' * 32}.tmp"
    other.write_bytes(b"x")
    live.write_bytes(b"x")
    net342(seed=3).save(path)
    assert sorted(os.listdir(tmp_path)) == sorted(["net.npz", other.name, live.name])
    same_network(mr.MLP.load(path), net342(seed=3))


def test_figures_stopped_by_ctrl_c_say_so_in_one_line_and_keep_the_old_file(tmp_path):
    path = tmp_path / "projection_cost.png"
    path.write_bytes(b"the old figure")
    code, err, during = interrupt(SLOW_FIGURE, path, signal.SIGINT)
    assert len(during) == 1
    assert code == 130
    assert err.count("\n") == 1 and "interrupted" in err and "Traceback" not in err, err
    assert path.read_bytes() == b"the old figure" and os.listdir(tmp_path) == [path.name]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_json_write_stopped_mid_write_leaves_nothing(tmp_path, sig):
    path = tmp_path / "bench.json"
    code, err, during = interrupt(SLOW_JSON, path, sig)
    assert len(during) == 1 and code != 0
    assert os.listdir(tmp_path) == []


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


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_save_into_a_read_only_folder_names_path(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        with pytest.raises(PermissionError, match=r"^path: folder .* is not writable"):
            net342().save(folder / "net.npz")
        assert os.listdir(folder) == []
    finally:
        folder.chmod(0o755)


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
    assert _files.write_atomically("--json", path, lambda f: f.write(data)) == str(path)
    assert path.read_bytes() == data and os.listdir(tmp_path) == ["out.json"]
