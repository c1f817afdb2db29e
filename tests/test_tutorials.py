"""Every tutorial runs headless, and every number a tutorial states in prose holds.

Numbers are checked by calling the same package functions the tutorial calls; where the
tutorial prints a line, the line is compared with a recomputation.
"""
import ast
import io
import os
import subprocess
import sys
from contextlib import redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import mlp_ref as mr
from mlp_ref import experiments, fixes, jacobian, losses, tutorial
from mlp_ref.setups import G_QUESTION, seed_setup, visible_setup

ROOT = Path(__file__).resolve().parents[1]
TUTORIALS = sorted((ROOT / "tutorials").glob("[0-9][0-9]_*.py"))
FRAMEWORKS = {"torch", "tensorflow", "jax", "keras", "functorch"}


def _env():
    """Headless, and one BLAS thread: the tutorials' matrices are tiny, and when several
    processes share two cores, OpenBLAS threads spinning on an 8 x 8 or 32 x 32 eigh can make
    it ten times slower than one thread."""
    return dict(os.environ, MPLBACKEND="Agg", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
                MKL_NUM_THREADS="1",
                PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))


def run_script(path, *args):
    return subprocess.run([sys.executable, str(path), *args], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, env=_env(), timeout=60, cwd=ROOT)


def headless(path):
    """The command line of a tutorial; 07 with PyTorch and TensorFlow hidden, as on a machine with
    only numpy and matplotlib (its run with them is tests/test_frameworks_tutorial.py's)."""
    if path.name == "07_from_numpy_to_frameworks.py":
        return [str(Path(__file__).resolve().parent / "_hide_frameworks.py"), str(path)]
    return [str(path)]


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    cpu_seconds: float          # user + system time of the tutorial's process


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """Each tutorial run once, headless, all at the same time: name -> Run. Their CPU time,
    unlike their wall time, does not depend on how many run at once."""
    folder = tmp_path_factory.mktemp("tutorials")
    started = {}
    for p in TUTORIALS:
        out, err = open(folder / f"{p.stem}.out", "w+"), open(folder / f"{p.stem}.err", "w+")
        proc = subprocess.Popen([sys.executable, *headless(p)], stdin=subprocess.DEVNULL, stdout=out,
                                stderr=err, text=True, env=_env(), cwd=ROOT)
        started[p.name] = (proc, out, err)
    runs = {}
    for name, (proc, out, err) in started.items():
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        texts = []
        for f in (out, err):
            f.seek(0)
            texts.append(f.read())
            f.close()
        runs[name] = Run(proc.returncode, *texts, usage.ru_utime + usage.ru_stime)
    return runs


def test_there_are_tutorials():
    names = [p.name for p in TUTORIALS]
    assert names == ["01_forward_backward.py", "02_the_question.py", "03_masking.py",
                     "04_layer_splitting.py", "05_projection.py", "06_side_by_side.py",
                     "07_from_numpy_to_frameworks.py"]


@pytest.mark.parametrize("path", TUTORIALS, ids=lambda p: p.name)
def test_tutorial_runs_headless(path, outputs):
    res = outputs[path.name]
    assert res.returncode == 0, res.stderr[-2000:]
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize("path", TUTORIALS, ids=lambda p: p.name)
def test_tutorial_is_cells_that_import_the_package(path):
    text = path.read_text()
    assert text.count("# %%") >= 3
    assert "import mlp_ref" in text or "from mlp_ref" in text
    tree = ast.parse(text)
    imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module}
    assert not imported & FRAMEWORKS, f"{path.name} imports a framework: {imported & FRAMEWORKS}"


def test_step_flag_does_not_block_without_a_terminal():
    res = run_script(TUTORIALS[0], "--step")        # stdin is /dev/null: no pause, no hang
    assert res.returncode == 0, res.stderr[-2000:]
    assert "press Enter" not in res.stdout


# -- mlp_ref.tutorial ---------------------------------------------------------------------------
class FakeStdin:
    def __init__(self, tty):
        self.tty = tty

    def isatty(self):
        return self.tty


def test_stepping_needs_the_flag_and_a_terminal():
    assert tutorial.stepping(["x.py", "--step"], FakeStdin(True))
    assert not tutorial.stepping(["x.py"], FakeStdin(True))
    assert not tutorial.stepping(["x.py", "--step"], FakeStdin(False))
    assert not tutorial.stepping(["--step"], FakeStdin(True))      # argv[0] is the script


def test_section_pauses_only_when_stepping(monkeypatch, capsys):
    calls = []
    monkeypatch.setattr("builtins.input", lambda prompt="": calls.append(prompt) or "")
    tutorial.section("Title", "some   text\n   on lines", step=True)
    tutorial.section("Other", step=False)
    out = capsys.readouterr().out
    assert len(calls) == 1 and "Title" in calls[0]
    assert "Title\n=====\nsome text on lines" in out and "Other\n=====" in out


@pytest.mark.parametrize("key, status, said", [(EOFError, 0, "(end of input)"),
                                               (KeyboardInterrupt, 130, "(Ctrl-C)")])
def test_ctrl_c_or_ctrl_d_at_a_pause_stops_with_one_line(monkeypatch, capsys, key, status, said):
    def pressed(prompt=""):
        raise key
    monkeypatch.setattr("builtins.input", pressed)
    with pytest.raises(SystemExit) as stop:
        tutorial.section("Title", step=True)
    assert stop.value.code == status
    assert capsys.readouterr().out == f"\nstopped before 'Title' {said}\n"


SCRIPT = """# %% [markdown]
# # A title
#
# The question, with $K_{12} = J_1 J_2^\\top$ and $\\eta$.

# %%
import sys
from mlp_ref.tutorial import run_headless

run_headless(globals(), ARGV, STDIN)
X = 1

# %% [markdown]
# ## 1. First
#
# Some **bold** text and `code`, and [a link](https://example.org).

# %%
for i in range(LINES):
    print("line", i)
if BREAK:
    raise KeyboardInterrupt

# %% [markdown]
# ## 2. Second

# %%
print("X is", X)
"""


def run_script_text(tmp_path, argv=("s.py",), stdin=None, lines=2, brk=False):
    path = tmp_path / "s.py"
    path.write_text(SCRIPT)
    namespace = {"__name__": "__main__", "__file__": str(path), "ARGV": list(argv),
                 "STDIN": stdin, "LINES": lines, "BREAK": brk}
    out = io.StringIO()
    with redirect_stdout(out), pytest.raises(SystemExit) as stop:
        exec(compile(SCRIPT, str(path), "exec"), namespace)
    return stop.value.code, out.getvalue()


def test_run_headless_prints_the_markdown_cells_between_the_code_cells(tmp_path):
    status, out = run_script_text(tmp_path)
    assert status == 0
    assert out == ("\nA title\n=======\n\nThe question, with K\u2081\u2082 = J\u2081 J\u2082\u1d40 and \u03b7.\n"
                   "\n1. First\n========\n\nSome bold text and code, and a link (https://example.org).\n"
                   "line 0\nline 1\n\n2. Second\n=========\nX is 1\n")


def test_run_headless_does_nothing_in_jupyter_or_on_import(tmp_path):
    for namespace in ({"__name__": "__main__", "__file__": "x.py", "get_ipython": print},
                      {"__name__": "__main__"}, {"__name__": "tutorial01", "__file__": "x.py"}):
        assert tutorial.run_headless(namespace) is None


def test_step_pauses_before_each_section_and_pages_a_long_one(tmp_path, monkeypatch):
    prompts = []
    monkeypatch.setattr("builtins.input", lambda prompt="": prompts.append(prompt) or "")
    monkeypatch.setattr("shutil.get_terminal_size", lambda *a: os.terminal_size((80, 13)))
    status, out = run_script_text(tmp_path, ("s.py", "--step"), FakeStdin(True), lines=25)
    assert status == 0 and "line 24" in out
    sections = [p for p in prompts if "press Enter for" in p]
    pages = [p for p in prompts if "more" in p]
    assert sections == ["\n[press Enter for: 1. First] ", "\n[press Enter for: 2. Second] "]
    assert len(pages) == (5 + 25) // 10            # a page is 13 - 3 lines; 5 lines of section 1 text


def test_ctrl_c_while_a_cell_runs_stops_with_one_line(tmp_path):
    status, out = run_script_text(tmp_path, brk=True)
    assert status == 130
    assert out.endswith("line 1\n\nstopped in '1. First' (Ctrl-C)\n") and "Traceback" not in out


def test_markdown_math_is_plain_text_in_every_tutorial(outputs):
    for path in TUTORIALS[:6]:
        out = outputs[path.name].stdout
        assert "$" not in out and "\\" not in out, path.name
        headings = [tutorial.markdown_text(c.source.splitlines()[0][3:])
                    for c in tutorial.cells(path.read_text())
                    if c.kind == "markdown" and c.source.startswith("## ")]
        positions = [out.index(f"\n{h}\n{'=' * len(h)}\n") for h in headings]
        assert len(headings) >= 5 and positions == sorted(positions), path.name


def test_every_tutorial_states_the_question_first_with_its_link():
    for path in TUTORIALS[:6]:
        first = tutorial.cells(path.read_text())[0]
        assert first.kind == "markdown", path.name
        assert "https://stackoverflow.com/questions/42182233" in first.source
        assert "$G = [0, -1]$" in first.source and "leaves out1 unchanged?" in first.source


def test_show_stages_prints_the_cli_lines(capsys):
    net, X, _ = seed_setup()
    tutorial.show_stages(net.backward(net.forward(X), G_QUESTION).stages, net)
    out = capsys.readouterr().out
    assert "dW2 = a1.T @ dz2   shape (4, 2)" in out
    assert "dz1 = da1 * sigmoid'(z1)   shape (8, 4)" in out


def test_tutorial_helpers_do_not_import_matplotlib():
    code = "import sys, mlp_ref.tutorial; print('matplotlib' in sys.modules)"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.stdout.strip() == "False", res.stderr


# -- 01_forward_backward: every number of its prose --------------------------------------------
@pytest.fixture(scope="module")
def seed():
    net, X, _ = seed_setup()
    record = net.forward(X)
    back = net.backward(record, G_QUESTION)
    return net, X, record, back


def test_01_setup_is_the_answers(seed):
    net, X, _, _ = seed
    assert net.sizes == [3, 4, 2] and net.activations == ["sigmoid", "identity"]
    assert net.init_std == 0.1 and X.shape == (8, 3) and net.n_params == 26
    assert np.all((0.0 <= X) & (X < 1.0))


def test_01_out1s_own_gradient_is_exactly_zero(seed):
    _, _, _, back = seed
    assert np.all(back.stages["dout"] == G_QUESTION) and np.all(back.stages["dz2"] == G_QUESTION)
    assert np.all(back.grads["W2"][:, 0] == 0.0) and back.grads["b2"][0] == 0.0


def test_01_every_row_of_da1_is_minus_out2s_weights(seed, outputs):
    net, _, _, back = seed
    assert np.all(back.stages["da1"] == -net.params["W2"][:, 1])
    assert "every row of da1 equals -W2[:, 1]: True" in outputs["01_forward_backward.py"].stdout


def test_01_no_entry_of_dW1_or_db1_is_zero(seed, outputs):
    _, _, _, back = seed
    assert np.all(back.grads["W1"] != 0.0) and np.all(back.grads["b1"] != 0.0)
    assert ("entries of dW1 that are zero: 0 of 12   entries of db1 that are zero: 0 of 4"
            in outputs["01_forward_backward.py"].stdout)


def test_01_the_step_raises_out2_by_about_1_5_and_moves_out1_by_1e_4(seed):
    net, X, record, back = seed
    d = net.copy().step(back.grads, 0.1)(X) - record.output
    assert np.all((1.4 < d[:, 1]) & (d[:, 1] < 1.6))
    assert np.all((1e-4 <= np.abs(d[:, 0])) & (np.abs(d[:, 0]) < 2e-4))
    ratio = np.median(d[:, 1] / np.abs(d[:, 0]))
    assert 10 ** 3.5 < ratio < 10 ** 4.5                       # "about 10^4 times less"


def test_01_out1s_change_is_exactly_the_hidden_layers_change(seed):
    net, X, record, back = seed
    stepped = net.copy().step(back.grads, 0.1)
    assert np.all(stepped.params["W2"][:, 0] == net.params["W2"][:, 0])
    assert stepped.params["b2"][0] == net.params["b2"][0]
    after = stepped.forward(X)
    d_hidden = (after.a[1] - record.a[1]) @ net.params["W2"][:, 0]
    np.testing.assert_allclose(after.output[:, 0] - record.output[:, 0], d_hidden,
                               rtol=0, atol=1e-15)


def test_01_halving_lr_halves_the_drift(seed):
    net, X, record, back = seed
    full = net.copy().step(back.grads, 0.1)(X)[:, 0] - record.output[:, 0]
    half = net.copy().step(back.grads, 0.05)(X)[:, 0] - record.output[:, 0]
    np.testing.assert_allclose(full / half, 2.0, atol=0.01)


def test_01_gradcheck_passes_far_below_its_tolerance(seed, outputs):
    net, X, _, _ = seed
    report = mr.gradcheck.check(net, X, G_QUESTION)
    assert report.ok and report.tol == 1e-7 and report.max_rel_error < 1e-10
    last = [l for l in outputs["01_forward_backward.py"].stdout.splitlines()
            if l.startswith("max rel_error")]
    assert last == [f"max rel_error {report.max_rel_error:.2e} (tol 1e-07): PASS"]


def test_01_a_mask_changes_nothing_when_G_already_ignores_out1(seed):
    net, X, record, back = seed
    masked = net.backward(record, G_QUESTION * np.array([0.0, 1.0]))
    for key in net.params:
        assert np.array_equal(masked.grads[key], back.grads[key])


def test_01_prints_every_weight_and_a_stage_to_check_by_hand(seed, outputs):
    net, X, record, _ = seed
    printed = io.StringIO()
    with redirect_stdout(printed):
        tutorial.show_params(net)
    out = outputs["01_forward_backward.py"].stdout
    assert printed.getvalue() in out and printed.getvalue().count("shape") == 4
    by_hand = X[0] @ net.params["W1"][:, 0] + net.params["b1"][0]
    assert by_hand == pytest.approx(record.z[1][0, 0], abs=1e-15)
    assert f"by hand: X[0] @ W1[:, 0] + b1[0] = {by_hand:.4f}   z1[0, 0] = {by_hand:.4f}" in out
    from mlp_ref import cli
    with redirect_stdout(io.StringIO()) as stages:
        cli.main(["stages"])
    assert printed.getvalue() in stages.getvalue()          # and `python -m mlp_ref stages`


# -- 02_the_question -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def setups():
    return {"seed": seed_setup(), "visible": visible_setup()}


def test_02_the_two_setups(setups):
    seed, visible = setups["seed"][0], setups["visible"][0]
    assert seed.sizes == [3, 4, 2] and seed.activations == ["sigmoid", "identity"]
    assert visible.sizes == [3, 16, 16, 2] and visible.activations == ["tanh", "tanh", "identity"]
    assert np.array_equal(setups["seed"][1], setups["visible"][1])      # "the same 8 samples"


def test_02_a_naive_step_raises_out2_and_moves_out1(setups):
    effect = {name: experiments.naive_step_effect(net, X, G_QUESTION, lr=experiments.LR[name])
              for name, (net, X, _) in setups.items()}
    seed, visible = effect["seed"]["delta"], effect["visible"]["delta"]
    assert 1.45 < seed[:, 1].mean() < 1.55                       # "about 1.5"
    assert 1e-4 < np.max(np.abs(seed[:, 0])) < 2.5e-4            # "at most about 2e-4"
    assert np.all(seed[:, 0] != 0.0)                             # "not zero"
    assert 1.3 < visible[:, 1].mean() < 1.5                      # "about 1.4"
    assert 0.3 < np.max(np.abs(visible[:, 0])) < 0.5             # "up to about 0.4"
    assert np.max(np.abs(visible[:, 0])) > 0.25 * visible[:, 1].mean()   # "more than a quarter"
    assert experiments.LR == {"seed": 0.1, "visible": 0.01}


def test_02_the_output_layer_carries_none_of_the_cross_talk(setups, outputs):
    part = {}
    for name, (net, X, _) in setups.items():
        K = jacobian.tangent_kernel_by_layer(net, X, 0, 1)
        assert np.all(K[net.depth] == 0.0), name                 # "exactly 0.0, in every entry"
        part[name] = {l: K[l].sum() / K["total"].sum() for l in range(1, net.depth + 1)}
    assert part["seed"][1] == pytest.approx(1.0, abs=1e-12)      # "all of it through the one"
    assert 0.6 < part["visible"][1] < 0.72                       # "about two thirds"
    assert 0.28 < part["visible"][2] < 0.4                       # "one third"
    assert outputs["02_the_question.py"].stdout.count(
        "output layer's share is exactly zero in every entry: True") == 2


def test_02_first_order_drift_is_minus_lr_K12_G2_built_from_dense_jacobians(setups):
    net, X, _ = setups["visible"]
    res = experiments.first_order_drift("visible", lrs=[1e-5])
    J = jacobian.dense_rows(net, X, keep=[0, 1])                 # rows (i, k), sample-major
    J1, J2 = J[0::2], J[1::2]
    predicted = -1e-5 * (J1 @ J2.T) @ np.full(len(X), -1.0)
    np.testing.assert_allclose(res["predicted"][0], predicted, rtol=1e-12)


def test_02_the_prediction_error_shrinks_in_proportion_to_lr():
    seed, visible = (experiments.first_order_drift(name)["rel_error"]    # lr 1e-5, ..., 0.1
                     for name in ("seed", "visible"))
    np.testing.assert_allclose(seed[1:] / seed[:-1], 10.0, rtol=0.1)      # x10 per decade
    np.testing.assert_allclose(visible[1:3] / visible[:2], 10.0, rtol=0.05)   # lr <= 1e-3
    assert 2e-4 < visible[0] < 4e-4                              # "about 3e-4 at lr = 1e-5"
    assert 0.3 < visible[3] < 0.5                                # "about 0.4 at lr 0.01"
    assert seed[-1] < 1e-3                                       # "better than 1e-3 at lr 0.1"


def test_02_the_dense_jacobian_of_out1_is_8_by_26_with_out2s_own_columns_zero(setups, outputs):
    net, X, _ = setups["seed"]
    J1 = jacobian.dense_rows(net, X, keep=[0])
    assert J1.shape == (8, 26)
    by_rows = np.array([jacobian.flatten(net.gradient(X[i:i + 1], [1.0, 0.0])) for i in range(8)])
    assert np.max(np.abs(by_rows - J1)) < 1e-15                  # one backward pass per row
    fd = np.empty_like(J1)                                       # and finite differences agree
    theta = jacobian.flatten(net.params)
    for c in range(26):
        e = np.zeros(26)
        e[c] = 1e-6
        plus, minus = (net.copy() for _ in range(2))
        plus.params = jacobian.unflatten(theta + e, net.params)
        minus.params = jacobian.unflatten(theta - e, net.params)
        fd[:, c] = (plus(X)[:, 0] - minus(X)[:, 0]) / 2e-6
    np.testing.assert_allclose(J1, fd, atol=1e-9)
    column = jacobian.unflatten(np.arange(26), net.params)
    out2s_own = [*column["W2"][:, 1], column["b2"][1]]
    assert np.all(J1[:, out2s_own] == 0.0)                      # "exactly 0"
    shared = [*column["W1"].ravel(), *column["b1"]]
    assert np.all(np.any(J1[:, shared] != 0.0, axis=0))          # "the columns of W1, b1 are not"
    out = outputs["02_the_question.py"].stdout
    assert f"(columns {out2s_own}) that are exactly 0 in every row: 5 of 5" in out
    assert out.count("equal to tangent_kernel_by_layer to ") == 2


def test_02_prints_the_first_order_errors_of_first_order_drift(outputs):
    out = outputs["02_the_question.py"].stdout
    for name in ("seed", "visible"):
        fo = experiments.first_order_drift(name)
        for lr, actual, err in zip(fo["lrs"], fo["actual"], fo["rel_error"]):
            assert f"  {lr:6.0e} {np.max(np.abs(actual)):14.3e} {err:16.2e}" in out


# -- 03_masking ---------------------------------------------------------------------------------
def test_03_the_masked_loss_zeroes_out1s_column_and_keeps_out2s(setups):
    net, X, Y = setups["seed"]
    _, G = losses.mse(net(X), Y)
    _, G_masked = losses.masked_mse(net(X), Y, experiments.MASK)
    assert np.all(G_masked[:, 0] == 0.0) and np.array_equal(G_masked[:, 1], G[:, 1])
    assert np.all(G[:, 0] != 0.0)
    masked, naive = fixes.masked(net, X, G, experiments.MASK), fixes.naive(net, X, G)
    assert not all(np.array_equal(masked[k], naive[k]) for k in naive)


def test_03_with_the_questions_G_the_mask_is_the_naive_step_bit_for_bit(setups, outputs):
    for net, X, _ in setups.values():
        naive = fixes.naive(net, X, G_QUESTION)
        masked = fixes.masked(net, X, G_QUESTION, experiments.MASK)
        assert all(np.array_equal(naive[k], masked[k]) for k in naive)
    out = outputs["03_masking.py"].stdout
    assert out.count("masked == naive on every parameter: True") == 2
    assert out.count("masked == naive on every parameter: False") == 1


def test_03_the_replay_verdict():
    rows = {r["op"]: r for r in experiments.replay_answer()}
    assert np.array_equal(rows["train_op2"]["hidden"], rows["initial"]["hidden"])
    assert np.all(rows["train_op2"]["d_out1"] == 0.0)
    unrun = rows["mask, all variables"]
    assert not np.array_equal(unrun["hidden"], rows["initial"]["hidden"])
    assert 1.5e-5 < np.max(np.abs(unrun["d_out1"])) < 3e-5        # "about 2e-5"


def test_03_a_mask_makes_the_gradient_blind_to_missing_labels(setups):
    net, X, Y = setups["seed"]
    out = net(X)
    missing = np.ones_like(Y)
    missing[[2, 5], 0] = 0.0
    filled = []
    for value in (0.0, 1000.0):
        y = Y.copy()
        y[[2, 5], 0] = value
        filled.append((y, *losses.masked_mse(out, y, missing)))
    (_, l0, G0), (y_junk, l1, G1) = filled
    g0, g1 = net.gradient(X, G0), net.gradient(X, G1)
    assert all(np.array_equal(g0[k], g1[k]) for k in g0)         # bit for bit
    assert l1 - l0 == pytest.approx(2 * 1000.0 ** 2 / Y.size)    # a constant apart
    norm = lambda g: np.sqrt(sum(np.sum(v ** 2) for v in g.values()))
    assert norm(net.gradient(X, losses.mse(out, y_junk)[1])) > 100 * norm(g0)   # "dominate"
    change = np.abs(net.copy().step(g0, 0.1)(X)[[2, 5], 0] - out[[2, 5], 0])
    assert np.all((0.15 < change) & (change < 0.25))              # "by about 0.2"


# -- 04_layer_splitting ---------------------------------------------------------------------------
PROBE = mr.data.probe_inputs()


def _held(model, stepped, X):
    return (np.array_equal(stepped(X)[:, 0], model(X)[:, 0])
            and np.array_equal(stepped(PROBE)[:, 0], model(PROBE)[:, 0]))


def test_04_freezing_holds_out1_bit_for_bit_at_every_lr(setups, outputs):
    for net, X, _ in setups.values():
        D = fixes.freeze(net, X, G_QUESTION)
        for lr in (1e-3, 1e-2, 1e-1, 1.0, 10.0):
            stepped = net.copy().step(D, lr)
            assert _held(net, stepped, X), lr
            assert np.mean(stepped(X)[:, 1] - net(X)[:, 1]) > 0
    lines = [l for l in outputs["04_layer_splitting.py"].stdout.splitlines()
             if "out1 identical on batch and unseen inputs" in l]
    assert len(lines) == 10 and all("inputs: True" in l for l in lines)


def test_04_var_list_alone_moves_out1_when_G_has_an_out1_column(setups):
    net, X, Y = setups["seed"]
    _, G = losses.mse(net(X), Y)
    stepped = net.copy().step(fixes.freeze(net, X, G, trainable=["W2", "b2"]), 0.1)
    assert np.max(np.abs(stepped(X)[:, 0] - net(X)[:, 0])) > 0.1


def test_04_heads_and_towers_hold_out1_even_for_the_mse(setups):
    net, X, Y = setups["seed"]
    _, G = losses.mse(net(X), Y)
    heads = mr.SplitHeads.from_mlp(net)
    assert np.array_equal(heads(PROBE), net(PROBE))
    grads = heads.gradient(X, G)
    only = lambda keys: {k: (g if k in keys else np.zeros_like(g)) for k, g in grads.items()}
    assert _held(heads, heads.copy().step(only(heads.head_keys(1)), 0.1), X)
    assert not _held(heads, heads.copy().step(only(heads.head_keys(1) + heads.trunk_keys), 0.1), X)
    towers = mr.TwoTower.from_mlp(net)
    assert np.max(np.abs(towers(PROBE) - net(PROBE))) < 1e-15
    grads = towers.gradient(X, G)
    D = {k: (g if k in towers.tower_keys(1) else np.zeros_like(g)) for k, g in grads.items()}
    assert _held(towers, towers.copy().step(D, 0.1), X)
    assert (towers.n_params, net.n_params) == (42, 26)
    assert (mr.TwoTower.from_mlp(setups["visible"][0]).n_params, setups["visible"][0].n_params) \
        == (706, 370)


def test_04_what_out2_can_still_learn(capacity, outputs):
    c = capacity
    assert len(c["steps"]) == 201 and c["n"] == 32 and c["target"] == "x1 x2 - x3"
    assert np.array_equal(c["heads"]["mse"], c["freeze"]["mse"])
    assert c["freeze"]["n_moved"] == c["heads"]["n_moved"] == 17
    assert 5.0 < c["freeze"]["mse"][-1] / c["naive"]["mse"][-1] < 7.5   # "about 6 times"
    np.testing.assert_allclose(c["towers"]["mse"], c["naive"]["mse"], rtol=1e-9)
    assert 1.8 < c["towers"]["n_params"] / c["naive"]["n_params"] < 2.0  # "almost twice"
    r = c["project+restore"]
    assert c["towers"]["mse"][-1] < r["mse"][-1] < c["freeze"]["mse"][-1]   # "in between"
    assert r["drift_batch"] <= 1e-12 and r["drift_unseen"] > 1e-3
    for name in ("freeze", "heads", "towers"):
        assert c[name]["drift_batch"] == c[name]["drift_unseen"] == 0.0
    assert experiments.format_capacity(c) in outputs["04_layer_splitting.py"].stdout


def test_04_the_loop_written_out_is_out2_capacitys(outputs):
    assert "the same curve as experiments.out2_capacity's, bit for bit: True" in \
        outputs["04_layer_splitting.py"].stdout


# -- 05_projection --------------------------------------------------------------------------------
LRS_05 = np.logspace(-5, -3, 5)


def test_05_the_projected_direction(setups):
    net, X, _ = setups["visible"]
    g, D = fixes.naive(net, X, G_QUESTION), fixes.project(net, X, G_QUESTION)
    J1 = jacobian.OutputJacobian(net, X, keep=[0])
    assert 45 < np.max(np.abs(J1.matvec(g))) < 53                # "about 49"
    assert np.max(np.abs(J1.matvec(D))) < 1e-12                  # "below 1e-12"
    fg, fD = jacobian.flatten(g), jacobian.flatten(D)
    assert abs(fD @ (fg - fD)) < 1e-12 * np.linalg.norm(fD) * np.linalg.norm(fg - fD)
    assert 0.82 < np.linalg.norm(fD) / np.linalg.norm(fg) < 0.86  # "about 84%"


@pytest.fixture(scope="module")
def steps_05():
    return {name: experiments.one_step(name, rules=["naive", "project"], lrs=LRS_05)
            for name in ("seed", "visible")}


def test_05_one_step_slopes_are_1_and_2_on_the_batch_and_1_off_it(steps_05, outputs):
    out = outputs["05_projection.py"].stdout
    for name, res in steps_05.items():
        naive = experiments.loglog_slope(LRS_05, res["naive"]["drift_batch"])
        proj = experiments.loglog_slope(LRS_05, res["project"]["drift_batch"])
        unseen = experiments.loglog_slope(LRS_05, res["project"]["drift_unseen"])
        assert abs(naive - 1.0) < 0.005 and abs(proj - 2.0) < 0.005      # printed "1.00", "2.00"
        assert abs(unseen - 1.0) < 0.05
        assert f"naive {naive:.2f}, project {proj:.2f}" == "naive 1.00, project 2.00"
        assert f"fitted log-log slopes: naive {naive:.2f}, project {proj:.2f}" in out
    v = steps_05["visible"]["project"]
    assert 15 < v["drift_unseen"][-1] / v["drift_batch"][-1] < 25        # "about 20 times"


def test_05_restoring_converges_quadratically_on_the_batch_only(setups):
    net, X, _ = setups["visible"]
    ref = net(X)[:, 0]
    stepped = net.copy().step(fixes.project(net, X, G_QUESTION), 0.01)
    report = fixes.restore(stepped, X, ref)
    h = report.history
    assert report.converged and report.iterations == 3 and h[-1] <= 1e-12
    assert 1e-2 < h[0] < 3e-2                                            # "about 2e-2"
    assert h[1] < 10 * h[0] ** 2 and h[2] < 10 * h[1] ** 2               # squares each step
    unseen = np.max(np.abs(stepped(PROBE)[:, 0] - net(PROBE)[:, 0]))
    assert 0.01 < unseen < 0.1                                           # "a few hundredths"


def test_05_the_gram_trick_and_its_memory(setups):
    net, X, _ = setups["seed"]
    J = jacobian.OutputJacobian(net, X, keep=[0])
    dense = J.dense()
    assert dense.shape == (8, 26)
    assert np.max(np.abs(J.gram() - dense @ dense.T)) < 1e-14 * np.max(np.abs(J.gram()))
    big = mr.MLP([784, 512, 512, 10], hidden="relu", init_std=0.05, seed=0)
    J_big = jacobian.OutputJacobian(big, np.random.default_rng(0).random((256, 784)), keep=[0])
    n, P = J_big.shape
    factors = (sum(a.size for a in J_big.inputs.values())
               + sum(s.size for s in J_big.signals.values()) + n * n)
    assert (n, P) == (256, 669_706) and n * P == 171_444_736             # "171 million"
    assert 784 + 512 + 512 + 512 + 512 + 10 == 2842
    assert factors == n * 2842 + n ** 2 == 793_088                       # "0.79 million"
    assert round(8 * n * P / 1e9, 1) == 1.4 and round(8 * factors / 1e6, 1) == 6.3
    assert n * P / factors > 200


def test_05_pinv_with_an_explicit_jacobian_equals_the_gram_route(setups, outputs):
    net, X, _ = setups["seed"]
    J = jacobian.dense_rows(net, X, keep=[0])
    g = jacobian.flatten(fixes.naive(net, X, G_QUESTION))
    D_pinv = g - np.linalg.pinv(J) @ (J @ g)
    D_gram = jacobian.flatten(fixes.project(net, X, G_QUESTION))
    D_square = g - J.T @ np.linalg.pinv(J @ J.T) @ (J @ g)
    scale = np.max(np.abs(g))
    assert np.linalg.matrix_rank(J) == 8                                 # "rank 8"
    assert 4e5 < np.linalg.cond(J) < 6e5                                 # "about 5e5"
    assert np.max(np.abs(D_pinv - D_gram)) / scale < 1e-12               # "below 1e-12"
    assert 1e-8 < np.max(np.abs(D_square - D_gram)) / scale < 1e-6      # "only to about 1e-7"
    assert "rank of J1 8, condition number" in outputs["05_projection.py"].stdout


# -- 06_side_by_side ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def table():
    return {(r["setup"], r["rule"]): r for r in experiments.question_table()}


def test_06_the_table_written_out_is_question_tables(table, outputs):
    assert experiments.format_table(list(table.values())) in outputs["06_side_by_side.py"].stdout


def test_06_reading_the_table(table):
    for setup in ("seed", "visible"):
        row = lambda rule: table[(setup, rule)]
        assert {k: v for k, v in row("masked").items() if k != "rule"} == \
            {k: v for k, v in row("naive").items() if k != "rule"}
        for rule in ("freeze", "span"):
            for key in ("drift_batch_1", "drift_unseen_1", "drift_batch_n", "drift_unseen_n"):
                assert row(rule)[key] <= 1e-12
            assert row(rule)["gain_n"] < 0.5 * row("naive")["gain_n"]
        assert row("project")["drift_batch_1"] < 0.1 * row("naive")["drift_batch_1"]
        assert row("project")["gain_1"] > 0.5 * row("naive")["gain_1"]      # "most of the gain"
        assert row("project+restore")["drift_batch_n"] <= 1e-12


def test_06_the_batch_is_not_the_world(table):
    v = lambda rule: table[("visible", rule)]
    assert v("project+restore")["drift_batch_n"] <= 1e-12
    assert v("project+restore")["drift_unseen_n"] > v("naive")["drift_unseen_n"]
    assert v("freeze")["drift_unseen_n"] == 0.0 and v("span")["drift_unseen_n"] <= 1e-12


def test_06_the_penalty(table, setups, outputs):
    for setup in ("seed", "visible"):
        naive, pen = table[(setup, "naive")], table[(setup, "penalty")]
        for key in ("gain_1", "drift_batch_1", "drift_unseen_1"):
            assert pen[key] == naive[key]                                # "in every digit"
    assert 0.6 < table[("visible", "penalty")]["drift_batch_n"] < 0.8    # "about 0.7"
    assert 1.8 < table[("visible", "naive")]["drift_batch_n"] < 2.0      # "naive's 1.9"
    lam_max = {}
    for name, (net, X, _) in setups.items():
        lam_max[name] = np.linalg.eigvalsh(jacobian.OutputJacobian(net, X, [0]).gram())[-1]
        lr = experiments.LR[name]
        assert lr * 0.5 * lam_max[name] < 2 < lr * 3.0 * lam_max[name]
    assert 13 < lam_max["seed"] < 17 and 150 < lam_max["visible"] < 190  # "about 15", "170"
    for name, (net, X, _) in setups.items():                             # "stable while lam < .."
        limit = fixes.penalty_limit(net, X) / experiments.LR[name]
        assert 0.5 < limit < 3.0 and limit == pytest.approx(2 / (experiments.LR[name] * lam_max[name]))
        assert f"stable while lam < {limit:.2f} at lr {experiments.LR[name]}" in outputs["06_side_by_side.py"].stdout
    assert experiments.PENALTY_LAM == 0.5
    t = experiments.trajectories("visible", rules=["p"], steps=20,
                                 directions={"p": experiments.penalty_rule(3.0)})["p"]
    assert t["drift_batch"][20] > 1e3 * t["drift_batch"][1]               # "runs away"


def test_06_optimizer_order():
    res = experiments.optimizer_order("visible")
    wrong, right = (res[name] for name in experiments.OPTIMIZER_ORDERS)
    assert abs(experiments.loglog_slope(res["lrs"], wrong["one_step"], 1e-3) - 1) < 0.1
    assert abs(experiments.loglog_slope(res["lrs"], right["one_step"], 1e-3) - 2) < 0.1
    assert len(res["steps"]) == 101 and res["lr"] == 1e-3
    assert wrong["drift"][-1] > 100 * right["drift"][-1]                 # "more than 100 times"
    assert wrong["gain"][-1] > 0 and right["gain"][-1] > 0


def test_06_the_trade_off(table):
    gain = lambda rule: table[("visible", rule)]["gain_n"] / table[("visible", "naive")]["gain_n"]
    assert gain("freeze") < 0.5 and gain("project+restore") > 0.9 and gain("penalty") >= 0.99


def test_06_the_measured_guarantees_are_the_designs(outputs):
    measured = experiments.measured_guarantees()
    expected = {"naive": ("O(lr)", "O(lr)"), "masked": ("O(lr)", "O(lr)"),
                "freeze": ("exactly 0", "exactly 0"), "project": ("O(lr^2)", "O(lr)"),
                "project+restore": ("round-off", "O(lr)"), "penalty": ("O(lr)", "O(lr)")}
    for setup in ("seed", "visible"):
        for rule, (batch, unseen) in expected.items():
            got = measured[(setup, rule)]
            assert (got["batch"][0], got["unseen"][0]) == (batch, unseen), (setup, rule)
        span = measured[(setup, "span")]
        assert {span["batch"][0], span["unseen"][0]} <= {"exactly 0", "round-off"}
    assert experiments.format_guarantees(measured) in outputs["06_side_by_side.py"].stdout
