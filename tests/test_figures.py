"""The figures command: every figure written, slide-sized and small, byte-identical from run to
run: ``python -m mlp_ref figures`` twice, in two processes: once from this checkout in this one
(conftest's ``figure_run``, which draws from the computations the other tests check), once from
an installed wheel in a fresh virtual environment, run from an empty folder (the figure data
ships inside the package), in another process started when the tests were collected
(tests/_background.py)."""
import re
import struct
from pathlib import Path

import pytest

from mlp_ref import figures

import _background
from _background import ROOT


@pytest.fixture(scope="module")
def runs(figure_run):
    """(folder of the run in this process, its progress lines, the wheel's result)."""
    folder, lines, _ = figure_run
    return folder, lines, _background.result("wheel")


def png_size(path):
    """(width, height) from the IHDR chunk that every PNG starts with."""
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR"
    return struct.unpack(">II", head[16:24])


def png_software(path):
    """The text of the PNG's "Software" tEXt chunk, or None."""
    data = Path(path).read_bytes()
    pos = 8
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"tEXt":
            key, _, value = data[pos + 8:pos + 8 + length].partition(b"\0")
            if key == b"Software":
                return value.decode("latin-1")
        pos += 12 + length
    return None


def test_every_figure_is_written(runs):
    a, _, _ = runs
    assert sorted(p.name for p in a.iterdir()) == sorted(figures.FIGURES)
    assert len(figures.FIGURES) == 15


def test_one_progress_line_per_figure_with_its_time(runs):
    """... and nothing after it: no title, label or note of any figure past its edge."""
    _, lines, _ = runs
    assert len(lines) == len(figures.FIGURES)
    for line, name in zip(lines, figures.FIGURES):
        assert re.fullmatch(rf"\[\d+/\d+\] .*{re.escape(name)}  \(\d+\.\d s\)", line), line


def test_pngs_are_slide_sized_and_small_and_say_what_drew_them(runs):
    a, _, _ = runs
    for name in figures.FIGURES:
        width, height = png_size(a / name)
        assert width >= 1000, (name, width)
        assert (a / name).stat().st_size < 300_000, name
        assert png_software(a / name) == figures.png_metadata()["Software"]


def test_an_installed_wheel_draws_every_figure_from_any_folder(runs):
    _, _, wheel = runs
    assert "error" not in wheel, wheel.get("error")
    out, stdout, where, script = wheel["result"]
    assert str(ROOT) not in where and "venv" in where         # the wheel's copy, not this checkout
    assert script == "['mlp_ref.cli:main']"                   # the mlp-ref console script
    assert sorted(p.name for p in out.iterdir()) == sorted(figures.FIGURES)
    assert f"[{len(figures.FIGURES)}/{len(figures.FIGURES)}]" in stdout


def test_two_runs_give_identical_bytes(runs):
    """The same command twice, in two processes: the same bytes."""
    a, _, wheel = runs
    assert "error" not in wheel, wheel.get("error")
    out = wheel["result"][0]
    for name in figures.FIGURES:
        assert (out / name).read_bytes() == (a / name).read_bytes(), name


def test_committed_figures_are_the_commands(runs):
    """figures/ in the repository holds every figure the command writes, at the size it writes
    them: after a change that moves a figure, run ``python -m mlp_ref figures`` and commit.

    Bytes are not compared: the drifts drawn at round-off (<= 1e-12) depend on the BLAS kernel
    the machine runs, so another CPU draws other pixels with the same versions of everything.
    Byte-identity is the promise of one machine: the same command twice (tests above)."""
    a, _, _ = runs
    for name in figures.FIGURES:
        committed = ROOT / "figures" / name
        assert committed.exists(), f"figures/{name} is not committed"
        assert png_size(committed) == png_size(a / name), f"figures/{name} is stale"
        assert (png_software(committed) or "").startswith("mlp-ref figures;"), name
