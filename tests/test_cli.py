import os
import subprocess
import sys

import pytest

from mlp_ref import cli


def run(*args):
    env = dict(os.environ, MPLBACKEND="Agg")
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


def test_figures_writes_into_out(tmp_path):
    # every figure through the CLI is test_figures.py's job; here: --out and --only
    res = run("figures", "--out", str(tmp_path), "--only", "seed_problem.png", "pareto")  # .png optional
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pareto.png", "seed_problem.png"]
    assert str(tmp_path / "seed_problem.png") in res.stdout and "[2/2]" in res.stdout


def test_figures_rejects_an_unknown_name(tmp_path):
    res = run("figures", "--out", str(tmp_path), "--only", "nope.png")
    assert res.returncode == 2 and "--only: unknown figures ['nope.png']" in res.stderr
    assert not any(tmp_path.iterdir())


def test_console_script_is_the_same_program():
    from importlib.metadata import entry_points
    eps = [ep for ep in entry_points(group="console_scripts") if ep.name == "mlp-ref"]
    assert eps and eps[0].value == "mlp_ref.cli:main"


def test_import_does_not_pull_in_matplotlib():
    code = "import sys, mlp_ref, mlp_ref.experiments; print('matplotlib' in sys.modules)"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.stdout.strip() == "False", res.stderr


BAD_ARGS = [
    (["stages", "--precision", "-1"], "--precision"),
    (["table", "--steps", "0"], "--steps"),
    (["table", "--steps", "x"], "--steps"),
    (["bench", "--batch", "0"], "--batch"),
    (["bench", "--repeats", "0"], "--repeats"),
    (["bench", "--sizes", "5"], "--sizes"),
    (["bench", "--sizes", "3,x"], "--sizes"),
    (["bench", "--dense-limit-gib", "-1"], "--dense-limit-gib"),
    (["bench", "--dtype", "float16"], "--dtype"),
    (["nonsense"], "invalid choice"),
]


@pytest.mark.parametrize("argv, named", BAD_ARGS, ids=[" ".join(a) for a, _ in BAD_ARGS])
def test_bad_command_lines_are_refused_naming_the_option(argv, named, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 2
    assert named in capsys.readouterr().err


def test_figures_into_an_unwritable_folder_says_so(capsys):
    assert cli.main(["figures", "--out", "/proc/no/such/folder", "--only", "seed_problem.png"]) == 2
    assert "--out: cannot write figures into '/proc/no/such/folder'" in capsys.readouterr().err
