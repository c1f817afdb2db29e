"""The command line: every command, its output against the measurements it prints, and its
refusals of bad options."""
import configparser
import errno
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mlp_ref.classroom import cli
from mlp_ref.measurements import answer_replay, rules, splitting, table
from mlp_ref.setups import OUTPUT_INDICES

ROOT = Path(__file__).resolve().parents[1]


def run(*args):
    env = dict(os.environ, MPLBACKEND="Agg",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, "-m", "mlp_ref", *args], capture_output=True,
                          text=True, env=env, timeout=120)


def test_help_lists_the_commands():
    res = run("--help")
    assert res.returncode == 0
    for name in cli.COMMANDS:
        assert name in res.stdout


def test_stages_prints_every_stage_in_order_with_shapes(capsys):
    assert cli.main(["stages"]) == 0
    text = capsys.readouterr().out
    names = ["a0", "z1", "a1", "z2", "a2",
             "dout", "dz2", "dW2", "db2", "da1", "dz1", "dW1", "db1", "da0"]
    positions = [text.index(f"\n{name} = ") for name in names]
    assert positions == sorted(positions)
    assert "dW2 = a1.T @ dz2   shape (4, 2)" in text
    assert "dz1 = da1 * sigmoid'(z1)   shape (8, 4)" in text
    assert "da0 = dz1 @ W1.T   shape (8, 3)" in text
    # the values printed are the real ones: dout is G = [0, -1] on every row, and so is dz2
    # (the output layer is the identity): 2 stages x 8 rows
    assert text.count("[ 0. -1.]") == 16


def test_figures_writes_into_out(tmp_path, capsys):
    # every figure through the CLI is test_figures.py's job; here: --out and --only
    assert cli.main(["figures", "--out", str(tmp_path), "--only", "seed_problem.png", "projection_cost"]) == 0
    out = capsys.readouterr().out                                             # .png is optional
    assert sorted(p.name for p in tmp_path.iterdir()) == ["projection_cost.png", "seed_problem.png"]
    assert str(tmp_path / "seed_problem.png") in out and "[2/2]" in out


def test_figures_rejects_an_unknown_name(tmp_path, capsys):
    assert cli.main(["figures", "--out", str(tmp_path), "--only", "nope.png"]) == 2
    assert "--only: unknown figures ['nope.png']" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_the_console_script_is_the_same_program():
    # what setup.cfg declares, so it holds from a plain checkout; the installed wheel's entry
    # point is read from its metadata in test_figures.py's wheel test
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    assert config["options.entry_points"]["console_scripts"].strip() == "mlp-ref = mlp_ref.classroom.cli:main"
    assert cli.build_parser().prog == "mlp-ref"


def test_no_command_line_module_pulls_in_matplotlib():
    code = ("import sys, mlp_ref, mlp_ref.classroom.cli, mlp_ref.classroom.figures, mlp_ref.measurements, "
            "mlp_ref.classroom.report, mlp_ref.classroom.tutorial; print('matplotlib' in sys.modules)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert res.stdout.strip() == "False", res.stderr


def test_table_is_the_default_and_prints_every_rule(capsys):
    assert cli.main(["--steps", "3"]) == 0             # no command: the table
    text = capsys.readouterr().out
    for name, rule in rules.RULES.items():
        assert f"seed     {name}" in text and f"visible  {name}" in text
        assert rule.guarantee in text
    assert "after 3 steps" in text and "3 steps, each way of holding out1" in text
    # the penalty's weight beside it, and a legend that defines every column
    assert f"seed     penalty lam={rules.PENALTY_LAM:g}" in text
    legend = text.split("Columns")[1].split("What each rule guarantees")[0]
    for column in ("lr", "out2 gain", "|dout1| batch", "|dout1| unseen", f"lam={rules.PENALTY_LAM:g}"):
        assert f"\n  {column:15} " in legend, column
    assert OUTPUT_INDICES in legend
    # the printed numbers are the measurements'
    naive, = table.question_table(setups=("seed",), rules=["naive"], long_steps=3)
    assert f" {naive['drift_batch_n']:10.3e} " in text
    capacity = splitting.out2_capacity(steps=3)
    for variant in ("freeze", "heads", "towers", "project+restore"):
        c = capacity[variant]
        assert f"\n{variant:16} {c['mse'][0]:9.4f} -> {c['mse'][-1]:9.4f}" in text.split("Teaching out2")[1]


def test_replay_prints_the_verdict(capsys):
    assert cli.main(["replay"]) == 0
    text = capsys.readouterr().out
    assert text.count("out1 MOVED") == 3 and text.count("out1 unchanged, bit for bit") == 1
    assert "the mask alone does not hold out1" in text
    for op in ("train_op2", "train_op12", "train_op_all", "mask, all variables"):
        assert f"after {op}" in text
    assert OUTPUT_INDICES in text
    # every row says what its change is measured from, and prints both, with the run's numbers
    for r in answer_replay.replay_answer()[1:]:
        section = text.split(f"== after {r['op']}:")[1].split("==")[0]
        start = "the initial state" if r["after"] == "initial" else f"the state after {r['after']}"
        assert f"run from {start}" in section
        by_op, since = (line for line in section.splitlines() if "max |change of out1|" in line)
        assert f"made by this op (from {start})" in by_op
        assert f"= {np.max(np.abs(r['d_out1'])):.3e}" in by_op
        assert "since the initial state" in since
        assert since.endswith(f"= {np.max(np.abs(r['d_out1_start'])):.3e}")


BAD_ARGS = [
    (["stages", "--precision", "-1"], "--precision"),
    (["table", "--steps", "0"], "--steps"),
    (["table", "--steps", "x"], "--steps: expected a whole number from 1 to 10000, got 'x'"),
    (["bench", "--batch", "0"], "--batch"),
    (["bench", "--repeats", "0"], "--repeats"),
    (["bench", "--sizes", "5"], "--sizes: expected at least two positive widths, e.g. 784,512,10, got '5'"),
    (["bench", "--sizes", "3,x"], "--sizes: expected at least two positive widths"),
    (["bench", "--dense-limit-gib", "-1"], "--dense-limit-gib"),
    (["bench", "--dtype", "float16"], "--dtype"),
    (["bench", "--dense-limit-gib", "inf"], "--dense-limit-gib"),
    (["bench", "--dense-limit-gib", "nan"], "--dense-limit-gib"),
    (["bench", "--dense-limit-gib", "0"], "--dense-limit-gib"),
    (["bench", "--dense-limit-gib", "1e300"], "--dense-limit-gib: expected a size in GiB above 0 and at most"),
    (["bench", "--dense-limit-gib", str(cli.MAX_DENSE_LIMIT_GIB * 2)], "--dense-limit-gib"),
    (["bench", "--sizes", f"{2**70},2"], "--sizes: widths"),
    (["bench", "--sizes", "100000000,100000000"], "--sizes: widths"),
    (["bench", "--memory-rows", "16,0"], "--memory-rows"),
    (["bench", "--memory-rows", str(10**9)], "--memory-rows: m = 1000000000"),
    (["figures", "--format", "gif"], "--format"),
    (["nonsense"], "invalid choice"),
    (["table", "--steps", "99999999999999999999"], "--steps: expected a whole number from 1 to 10000"),
    (["stages", "--precision", "99999999999999999999"], "--precision: expected a whole number from 0 to 17"),
    (["replay", "--precision", "18"], "--precision"),
    (["bench", "--memory-rows", "4,4,4"], "--memory-rows: expected distinct sizes"),
    (["bench", "--json", ""], "--json: expected a file path, got ''"),
    (["check", ""], "file: expected a file path, got ''"),
]


@pytest.mark.parametrize("argv, named", BAD_ARGS, ids=[" ".join(a) for a, _ in BAD_ARGS])
def test_bad_command_lines_are_refused_naming_the_option(argv, named, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 2
    assert named in capsys.readouterr().err


def test_figures_only_names_each_figure_once_in_the_format_asked(tmp_path, capsys):
    """--only may be repeated (its names add up); a name is drawn once; a name whose extension
    is not the --format's is refused rather than written in the other format."""
    assert cli.main(["figures", "--out", str(tmp_path), "--only", "projection_cost",
                     "--only", "projection_cost.png", "projection_cost"]) == 0
    assert os.listdir(tmp_path) == ["projection_cost.png"]
    assert capsys.readouterr().out.count("projection_cost.png") == 1
    assert cli.main(["figures", "--out", str(tmp_path), "--only", "projection_cost.svg"]) == 2
    assert "--only: ['projection_cost.svg'] would be written as .png files" in capsys.readouterr().err
    assert os.listdir(tmp_path) == ["projection_cost.png"]
    afile = tmp_path / "projection_cost.png"
    assert cli.main(["figures", "--out", str(afile), "--only", "projection_cost"]) == 2
    assert f"'{afile}' is a file, not a folder" in capsys.readouterr().err


@pytest.mark.slow                 # a command in a child process, and another: CPU for its startups
def test_a_reader_that_goes_away_or_a_full_disk_is_one_line_not_a_traceback():
    env = dict(os.environ, PYTHONPATH=str(ROOT), MPLBACKEND="Agg")
    piped = subprocess.run(f"{sys.executable} -m mlp_ref stages | head -1", shell=True,
                           capture_output=True, text=True, env=env)
    assert piped.stdout.startswith("MLP([3, 4, 2]") and piped.stderr == ""
    if os.path.exists("/dev/full"):
        # buffered, as a shell runs it (the output fails at the last flush), and unbuffered
        for buffered in ({k: v for k, v in env.items() if k != "PYTHONUNBUFFERED"},
                         dict(env, PYTHONUNBUFFERED="1")):
            with open("/dev/full", "w") as full_disk:
                full = subprocess.run([sys.executable, "-m", "mlp_ref", "replay"], stdout=full_disk,
                                      stderr=subprocess.PIPE, text=True, env=buffered)
            assert (full.returncode, full.stderr) == (1, "replay: cannot write the output (No space left on device)\n")


def test_figures_into_an_unwritable_folder_says_so(capsys):
    assert cli.main(["figures", "--out", "/proc/no/such/folder", "--only", "seed_problem.png"]) == 2
    assert capsys.readouterr().err.startswith("--out: cannot make the folder '/proc/no/such/folder'")


def test_bench_dense_limit_takes_the_largest_size_it_states():
    """The bound is 2**50 bytes: at it, the limit is still an exact number of bytes."""
    args = cli.build_parser().parse_args(["bench", "--dense-limit-gib", str(cli.MAX_DENSE_LIMIT_GIB)])
    assert int(args.dense_limit_gib * 2**30) == 2**50
    with pytest.raises(SystemExit) as info:
        cli.build_parser().parse_args(["bench", "--dense-limit-gib", str(cli.MAX_DENSE_LIMIT_GIB * 1.0001)])
    assert info.value.code == 2


def test_bench_dense_limit_1e300_is_one_usage_line_not_a_traceback():
    res = run("bench", "--dense-limit-gib", "1e300")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    errors = [line for line in res.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and "--dense-limit-gib" in errors[0] and "'1e300'" in errors[0]


def _full_disk_savefig(monkeypatch):
    """Figure.savefig writing into a full disk: the real savefig onto /dev/full (the kernel's own
    ENOSPC) where there is one, else half a figure and then ENOSPC."""
    import matplotlib.figure
    savefig = matplotlib.figure.Figure.savefig

    def full(self, f, **kwargs):
        if os.path.exists("/dev/full"):
            full_disk = os.open("/dev/full", os.O_WRONLY)
            os.dup2(full_disk, f.fileno())
            os.close(full_disk)
            return savefig(self, f, **kwargs)
        f.write(b"\x89PNG half a figure")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", full)


def test_figures_on_a_full_disk_name_the_file_they_could_not_write(tmp_path, monkeypatch, capsys):
    """Not "cannot write the output" (stdout's message): the figure file in --out, in one line,
    exit status 1 (the machine failed, not the command line), and nothing half-written left."""
    (tmp_path / "projection_cost.png").write_bytes(b"the old figure")
    _full_disk_savefig(monkeypatch)
    assert cli.main(["figures", "--out", str(tmp_path), "--only", "projection_cost"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"--out: cannot write {str(tmp_path / 'projection_cost.png')!r}: the disk is full")
    assert os.listdir(tmp_path) == ["projection_cost.png"]
    assert (tmp_path / "projection_cost.png").read_bytes() == b"the old figure"


def test_figures_whose_folder_cannot_be_made_on_a_full_disk_name_it(tmp_path, monkeypatch, capsys):
    from mlp_ref import plots  # noqa: F401  (matplotlib makes its own folders when imported)

    def makedirs(name, mode=0o777, exist_ok=False):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(os, "makedirs", makedirs)
    out = tmp_path / "new"
    assert cli.main(["figures", "--out", str(out), "--only", "projection_cost"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"--out: cannot make the folder {str(out)!r}")


def test_the_declared_floors_hold_here_and_ci_tests_them():
    # setup.cfg's floors for Python, numpy and matplotlib; .ci/run runs the suite a second time
    # with exactly the numpy and matplotlib floors, where this test then meets them with ==
    import matplotlib
    import numpy

    def version(text):
        return tuple(int(p) for p in text.split(".")[:3] if p.isdigit())

    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    floors = dict(r.replace(" ", "").split(">=") for r in
                  config["options"]["install_requires"].split("\n") if r.strip())
    assert set(floors) == {"numpy", "matplotlib"}
    assert version(numpy.__version__) >= version(floors["numpy"])
    assert version(matplotlib.__version__) >= version(floors["matplotlib"])
    assert sys.version_info[:2] >= version(config["options"]["python_requires"].lstrip(">="))
    ci = (ROOT / ".ci" / "run").read_text()
    assert 'cfg["options"]["install_requires"]' in ci and 'replace(">=", "==")' in ci


def test_ci_installs_every_extra_that_setup_cfg_declares():
    # In CI no test may skip for a missing extra (tests/_extras.py fails instead): so .ci/run must
    # install each of them itself, on a new machine that has none of them.
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    extras = set(config["options.extras_require"])
    ci = (ROOT / ".ci" / "run").read_text()
    installed = set(re.findall(r"pip install [^\n]*-e '\.\[(\w+)\]'", ci))
    assert extras == {"test", "notebooks", "frameworks"}
    assert installed == extras


def test_bench_keeps_its_table_when_the_json_cannot_be_written(tmp_path, monkeypatch, capsys):
    """The JSON is written last, after minutes of measuring: a folder that cannot take it then
    (a full disk, a folder removed meanwhile) is one line, and the table printed above stays
    the result. (The run itself is replaced here: only the writing is under test.)"""
    from mlp_ref.fast import bench
    monkeypatch.setattr(bench, "run", lambda **kw: {"results": "measured"})
    monkeypatch.setattr(bench, "format_table", lambda results: "the table of the run")
    args = cli.build_parser().parse_args(["bench", "--json", str(tmp_path / "gone" / "bench.json")])
    assert bench.main(args) == 1
    out, err = capsys.readouterr()
    assert out == "the table of the run\n"
    assert err.startswith(f"--json: could not write '{tmp_path / 'gone' / 'bench.json'}'")
    assert err.rstrip().endswith("the results are the table above") and not (tmp_path / "gone").exists()


def test_a_reader_that_goes_away_during_figures_is_not_blamed_on_out(monkeypatch, tmp_path, capsys):
    """The progress lines' stdout breaking is not --out's fault (BrokenPipeError is an OSError,
    which figures reports as --out's): main ends quietly, as for every command."""
    from mlp_ref.classroom import cli as cli_module

    def broken(*args, **kwargs):
        raise BrokenPipeError(32, "Broken pipe")
    monkeypatch.setattr(cli_module, "write_all", broken)
    assert cli.main(["figures", "--out", str(tmp_path)]) == 1
    assert "--out" not in capsys.readouterr().err
