"""The figures command: every figure written, slide-sized and small, and the same bytes on every
machine: ``python -m mlp_ref figures`` from an installed wheel, in a fresh virtual environment,
run from an empty folder (the figure data ships inside the package), writes the very bytes
committed in figures/; so does the command in this checkout under every CPU that CI's matrix
emulates (numpy's SIMD dispatch cut to AVX2 and to its baseline, OpenBLAS's Prescott, Haswell
and SkylakeX kernels: .ci/machines.py), and so do the animations' GIFs. Nothing in a file
depends on the machine: no version or date, round-off drawn on its own row of the band, never
by its last bits (plots/axes.py). Slow: every test here is marked."""
import os
import re
import subprocess
import sys

import pytest
from _drawn import png_size, png_software
from _runs import ROOT, wheel_figures

from mlp_ref.classroom import figures

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The wheel's result: its folder, what it printed, the mlp_ref it imported, its console script."""
    return wheel_figures(tmp_path_factory.mktemp("wheel"))


def test_every_figure_is_written(runs):
    out, _, _, _ = runs
    assert sorted(p.name for p in out.iterdir()) == sorted(figures.FIGURES)
    assert len(figures.FIGURES) == 18


def test_one_progress_line_per_figure_with_its_time(runs):
    """... and nothing after it: no title, label or note of any figure past its edge."""
    _, stdout, _, _ = runs
    lines = stdout.splitlines()
    assert len(lines) == len(figures.FIGURES)
    for line, name in zip(lines, figures.FIGURES):
        assert re.fullmatch(rf"\[\d+/\d+\] .*{re.escape(name)}  \(\d+\.\d s\)", line), line


def test_pngs_are_slide_sized_and_small_and_say_what_drew_them(runs):
    out, _, _, _ = runs
    for name in figures.FIGURES:
        width, height = png_size(out / name)
        assert width >= 1000, (name, width)
        assert (out / name).stat().st_size < 300_000, name
        assert png_software(out / name) == figures.png_metadata()["Software"]


def test_an_installed_wheel_draws_every_figure_from_any_folder(runs):
    out, stdout, where, script = runs
    assert str(ROOT) not in where and "venv" in where         # the wheel's copy, not this checkout
    assert script == "['mlp_ref.classroom.cli:main']"                   # the mlp-ref console script
    assert f"[{len(figures.FIGURES)}/{len(figures.FIGURES)}]" in stdout


def test_the_wheel_writes_the_committed_bytes(runs):
    """figures/ holds what the command writes, byte for byte: after a change that moves a
    figure, run ``python -m mlp_ref figures`` and commit (a fresh clone's quick start then leaves
    ``git status`` clean)."""
    out, _, _, _ = runs
    for name in figures.FIGURES:
        committed = ROOT / "figures" / name
        assert committed.exists(), f"figures/{name} is not committed"
        assert (out / name).read_bytes() == committed.read_bytes(), f"figures/{name} differs"


def emulated_machines():
    """(name, {variable: value}) of every CPU .ci/machines.py emulates here, but its BLAS thread
    counts (the figures' commands choose one thread themselves)."""
    res = subprocess.run([sys.executable, str(ROOT / ".ci" / "machines.py")], capture_output=True,
                         text=True, check=True)
    rows = [line.split("\t") for line in res.stdout.splitlines()]
    return [(name, dict(v.split("=", 1) for v in variables.split())) for name, variables in rows
            if "THREADS" not in variables]


@pytest.mark.parametrize("command, suffix", [("figures", ".png"), ("animate", ".gif")])
def test_every_emulated_cpu_draws_the_committed_bytes(command, suffix, tmp_path):
    for name, variables in emulated_machines():
        out = tmp_path / name.replace(" ", "_")
        res = subprocess.run([sys.executable, "-m", "mlp_ref", command, "--out", str(out)],
                             capture_output=True, text=True, cwd=ROOT, timeout=600,
                             env=dict(os.environ, **variables))
        assert res.returncode == 0, (name, res.stderr[-2000:])
        drawn = sorted(out.glob("*" + suffix))
        assert drawn, name
        differ = [p.name for p in drawn if p.read_bytes() != (ROOT / "figures" / p.name).read_bytes()]
        assert not differ, f"{name} ({variables}) draws other bytes: {differ}"
