"""Every tutorial runs headless, and every number a tutorial states in prose holds.

Numbers are checked by calling the same package functions the tutorial calls; where the
tutorial prints a line, the line is compared with a recomputation.
"""
import ast
import io
import os
import runpy
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pytest

import mlp_ref as mr
from mlp_ref import tutorial
from mlp_ref.setups import G_QUESTION, seed_setup

ROOT = Path(__file__).resolve().parents[1]
TUTORIALS = sorted((ROOT / "tutorials").glob("[0-9][0-9]_*.py"))
FRAMEWORKS = {"torch", "tensorflow", "jax", "keras", "functorch"}


def run_script(path, *args):
    env = dict(os.environ, MPLBACKEND="Agg",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, str(path), *args], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, env=env, timeout=60, cwd=ROOT)


@pytest.fixture(scope="module")
def outputs():
    """Each tutorial run once, headless: name -> CompletedProcess."""
    return {p.name: run_script(p) for p in TUTORIALS}


def test_there_are_tutorials():
    names = [p.name for p in TUTORIALS]
    assert "01_forward_backward.py" in names and "07_from_numpy_to_frameworks.py" in names


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


def test_section_survives_a_closed_stdin(monkeypatch, capsys):
    def closed(prompt=""):
        raise EOFError
    monkeypatch.setattr("builtins.input", closed)
    tutorial.section("Title", step=True)
    assert "Title" in capsys.readouterr().out


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


# -- 07_from_numpy_to_frameworks -----------------------------------------------------------------
@pytest.fixture(scope="module")
def snippets():
    with redirect_stdout(io.StringIO()):
        namespace = runpy.run_path(str(ROOT / "tutorials" / "07_from_numpy_to_frameworks.py"),
                                   run_name="__main__")
    return namespace["SNIPPETS"]


def test_07_every_snippet_is_valid_python(snippets):
    assert len(snippets) >= 12
    for (framework, name), code in snippets.items():
        compile(code, f"<{framework}: {name}>", "exec")


def test_07_covers_every_fix_in_both_frameworks(snippets):
    names = {name for _, name in snippets}
    assert {"freeze", "mask", "heads", "project", "adam", "restore", "penalty"} <= names
    for name in ("freeze", "mask", "heads", "project", "adam", "penalty"):
        assert ("PyTorch", name) in snippets and ("TensorFlow 2", name) in snippets


def test_07_snippets_name_the_apis_the_text_promises(snippets):
    code = "\n".join(snippets.values())
    for api in ("requires_grad_(False)", "tape.gradient(loss, [W2, b2])", "jacrev", "vmap",
                "functional_call", "tape.jacobian", "torch.linalg.pinv", "torch.linalg.lstsq",
                "tf.linalg.pinv", "opt.step()", "apply_gradients"):
        assert api in code, api


def test_07_the_snippets_are_printed(snippets, outputs):
    out = outputs["07_from_numpy_to_frameworks.py"].stdout
    assert "depends on no framework" in out
    for (framework, name), code in snippets.items():
        assert f"--- {framework}: {name} ---" in out
        assert code.splitlines()[0] in out


def test_07_freezing_holds_out1_exactly_on_unseen_inputs(seed):
    net, X, _, back = seed
    D = {k: (v if k in ("W2", "b2") else np.zeros_like(v)) for k, v in back.grads.items()}
    probe = mr.data.probe_inputs()
    stepped = net.copy().step(D, 0.1)
    assert np.array_equal(stepped(probe)[:, 0], net(probe)[:, 0])
    assert np.all(stepped(probe)[:, 1] > net(probe)[:, 1])


def test_07_the_penalty_first_step_is_the_naive_step(seed):
    net, X, record, back = seed
    lam, out1_ref = 10.0, record.output[:, 0].copy()
    G_pen = np.tile(G_QUESTION, (len(X), 1))
    G_pen[:, 0] += lam * (record.output[:, 0] - out1_ref)      # d/dout1 of lam/2 ||out1 - ref||^2
    pen = net.backward(record, G_pen)
    for key in net.params:
        assert np.array_equal(pen.grads[key], back.grads[key])
