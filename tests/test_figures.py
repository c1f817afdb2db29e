"""The figures command: every figure written, slide-sized and small, byte-identical from run to
run: ``python -m mlp_ref figures`` from an installed wheel, in a fresh virtual environment, run
from an empty folder (the figure data ships inside the package), compared byte for byte with
an earlier run of each figure in another process. Slow: every test here is marked.

That earlier run is the copy committed in figures/, the output of ``python -m mlp_ref figures``
in a checkout, where it has the wheel's very bytes. A figure whose committed copy differs (drawn
on another CPU: round-off, README "Reproducibility"; or stale) is drawn again in this process,
and so is every figure when figures/ was drawn with other versions of matplotlib or numpy.
Whichever it is, every figure's bytes are those of two runs in two processes."""
import contextlib
import io
import re

import pytest
from _drawn import png_size, png_software
from _runs import ROOT, wheel_figures

from mlp_ref.classroom import cli, figures

pytestmark = pytest.mark.slow


def draw_here(folder, names):
    """``python -m mlp_ref figures --out folder --only names``, run in this process."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        assert cli.main(["figures", "--out", str(folder), "--only", *names]) == 0, printed.getvalue()


def same_bytes(a, b):
    """Both files exist and hold the same bytes."""
    return a.exists() and b.exists() and a.read_bytes() == b.read_bytes()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """(the wheel's result: its folder, what it printed, the mlp_ref it imported, its console
    script; figure name -> the file of an earlier run of the command with which to compare the
    wheel's)."""
    software = figures.png_metadata()["Software"]
    committed = {name: ROOT / "figures" / name for name in figures.FIGURES}
    here = tmp_path_factory.mktemp("figures")
    if not all(path.exists() and png_software(path) == software for path in committed.values()):
        draw_here(here, figures.FIGURES)
    wheel = wheel_figures(tmp_path_factory.mktemp("wheel"))
    out = wheel[0]
    again = [name for name in figures.FIGURES
             if not (here / name).exists() and not same_bytes(committed[name], out / name)]
    if again:
        draw_here(here, again)
    return wheel, {name: here / name if (here / name).exists() else committed[name]
                   for name in figures.FIGURES}


def test_every_figure_is_written(runs):
    (out, _, _, _), _ = runs
    assert sorted(p.name for p in out.iterdir()) == sorted(figures.FIGURES)
    assert len(figures.FIGURES) == 18


def test_one_progress_line_per_figure_with_its_time(runs):
    """... and nothing after it: no title, label or note of any figure past its edge."""
    (_, stdout, _, _), _ = runs
    lines = stdout.splitlines()
    assert len(lines) == len(figures.FIGURES)
    for line, name in zip(lines, figures.FIGURES):
        assert re.fullmatch(rf"\[\d+/\d+\] .*{re.escape(name)}  \(\d+\.\d s\)", line), line


def test_pngs_are_slide_sized_and_small_and_say_what_drew_them(runs):
    (out, _, _, _), _ = runs
    for name in figures.FIGURES:
        width, height = png_size(out / name)
        assert width >= 1000, (name, width)
        assert (out / name).stat().st_size < 300_000, name
        assert png_software(out / name) == figures.png_metadata()["Software"]


def test_an_installed_wheel_draws_every_figure_from_any_folder(runs):
    (out, stdout, where, script), _ = runs
    assert str(ROOT) not in where and "venv" in where         # the wheel's copy, not this checkout
    assert script == "['mlp_ref.classroom.cli:main']"                   # the mlp-ref console script
    assert f"[{len(figures.FIGURES)}/{len(figures.FIGURES)}]" in stdout


def test_two_runs_give_identical_bytes(runs):
    """The same command twice, in two processes: the same bytes (which earlier run each figure
    is compared with: the module's docstring). Where the committed copy is that run, ``runs``
    took it for having the wheel's very bytes, and that equality is the evidence; every other
    figure was drawn in this process and is compared here, where it can differ."""
    (out, _, _, _), earlier = runs
    assert sorted(earlier) == sorted(figures.FIGURES)
    for name, path in earlier.items():
        assert path != out / name
        assert (out / name).read_bytes() == path.read_bytes(), (name, path)


def test_committed_figures_are_the_commands(runs):
    """figures/ in the repository holds every figure the command writes, at the size it writes
    them: after a change that moves a figure, run ``python -m mlp_ref figures`` and commit.

    Bytes are not required to match: the drifts drawn at round-off (<= 1e-12) depend on the BLAS
    kernel the machine runs, so another CPU draws other pixels with the same versions of
    everything. Byte-identity is the promise of one machine (the test above)."""
    (out, _, _, _), _ = runs
    for name in figures.FIGURES:
        committed = ROOT / "figures" / name
        assert committed.exists(), f"figures/{name} is not committed"
        assert png_size(committed) == png_size(out / name), f"figures/{name} is stale"
        assert (png_software(committed) or "").startswith("mlp-ref figures;"), name

