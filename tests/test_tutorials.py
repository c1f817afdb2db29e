"""Every tutorial runs headless, imports the package rather than repeating it, and prints the
numbers the package computes: each printed line checked here is compared with a recomputation.
The helpers of ``mlp_ref.classroom.tutorial`` (headless narration, --step, Ctrl-C) are tested here too.

Whether those numbers say what the narration says is tested where each claim lives (one module
per concept: test_question, test_masking, test_splitting, test_projection, test_table, ...).
"""
import ast
import io
import os
import re
import subprocess
import sys
import textwrap
from contextlib import redirect_stdout

import numpy as np
import pytest
from _frameworks import NAMES, printed_sources
from _runs import ROOT, TUTORIALS, run_tutorial, tutorial_env

import mlp_ref as mr
from mlp_ref import jacobian
from mlp_ref.classroom import report, tutorial
from mlp_ref.measurements import drift, fits, question
from mlp_ref.setups import G_QUESTION, LR, seed_setup

FRAMEWORKS = {"torch", "tensorflow", "jax", "optax", "keras", "functorch"}


def run_script(path, *args):
    return subprocess.run([sys.executable, str(path), *args], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, env=tutorial_env(), timeout=60, cwd=ROOT)


class Outputs(dict):
    """name -> Run(returncode, stdout, stderr) of the tutorial run headless as a script, each
    run once, when a test first reads it."""

    def __missing__(self, name):
        self[name] = run_tutorial(ROOT / "tutorials" / name)
        return self[name]


@pytest.fixture(scope="module")
def outputs():
    return Outputs()


def test_there_are_tutorials():
    names = [p.name for p in TUTORIALS]
    assert names == ["01_forward_backward.py", "02_the_question.py", "03_masking.py",
                     "04_layer_splitting.py", "05_projection.py", "06_side_by_side.py",
                     "07_from_numpy_to_frameworks.py", "08_a_real_task.py", "09_the_field.py"]


@pytest.mark.parametrize("path", TUTORIALS, ids=lambda p: p.name)
@pytest.mark.slow
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


@pytest.mark.slow
def test_step_flag_does_not_block_without_a_terminal():
    res = run_script(TUTORIALS[0], "--step")        # stdin is /dev/null: no pause, no hang
    assert res.returncode == 0, res.stderr[-2000:]
    assert "press Enter" not in res.stdout


# -- mlp_ref.classroom.tutorial ---------------------------------------------------------------------------
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


@pytest.mark.parametrize("key, status, said", [(EOFError, 0, "(end of input)"),
                                               (KeyboardInterrupt, 130, "(Ctrl-C)")])
def test_ctrl_c_or_ctrl_d_at_a_pause_stops_with_one_line(monkeypatch, capsys, key, status, said):
    def pressed(prompt=""):
        raise key
    monkeypatch.setattr("builtins.input", pressed)
    with pytest.raises(SystemExit) as stop:
        tutorial.pause("\n[press Enter for: Title] ", "before 'Title'")
    assert stop.value.code == status
    assert capsys.readouterr().out == f"\nstopped before 'Title' {said}\n"


SCRIPT = """# %% [markdown]
# # A title
#
# The question, with $K_{12} = J_1 J_2^\\top$ and $\\eta$.

# %%
import sys
from mlp_ref.classroom.tutorial import run_headless

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


@pytest.mark.parametrize("key, status, said", [(EOFError, 0, "(end of input)"),
                                               (KeyboardInterrupt, 130, "(Ctrl-C)")])
@pytest.mark.parametrize("at", ["more", "press Enter for: 2."])
def test_ctrl_c_or_ctrl_d_stops_at_every_prompt_of_step(tmp_path, monkeypatch, key, status, said, at):
    # the pager's prompt too: its "stopped" line once, then the end (it used to go through the
    # pager, whose line count was still at its limit, which asked again, and again)
    prompts = []

    def pressed(prompt=""):
        prompts.append(prompt)
        if at in prompt:
            raise key
        return ""
    monkeypatch.setattr("builtins.input", pressed)
    monkeypatch.setattr("shutil.get_terminal_size", lambda *a: os.terminal_size((80, 13)))
    code, out = run_script_text(tmp_path, ("s.py", "--step"), FakeStdin(True), lines=25)
    assert code == status
    assert sum(at in p for p in prompts) == 1 and at in prompts[-1]
    where = "in the middle of a section" if at == "more" else "before '2. Second'"
    assert out.endswith(f"\nstopped {where} {said}\n") and out.count("stopped") == 1


def test_ctrl_c_while_a_cell_runs_stops_with_one_line(tmp_path):
    status, out = run_script_text(tmp_path, brk=True)
    assert status == 130
    assert out.endswith("line 1\n\nstopped in '1. First' (Ctrl-C)\n") and "Traceback" not in out


@pytest.mark.slow
def test_markdown_math_is_plain_text_in_every_tutorial(outputs):
    for path in TUTORIALS:
        out = outputs[path.name].stdout
        assert "$" not in out and "\\" not in out, path.name
        headings = [tutorial.markdown_text(c.source.splitlines()[0][3:])
                    for c in tutorial.cells(path.read_text())
                    if c.kind == "markdown" and c.source.startswith("## ")]
        positions = [out.index(f"\n{h}\n{'=' * len(h)}\n") for h in headings]
        assert len(headings) >= 5 and positions == sorted(positions), path.name


def test_every_tutorial_states_the_question_first_with_its_link():
    for path in TUTORIALS:
        first = tutorial.cells(path.read_text())[0]
        assert first.kind == "markdown", path.name
        assert "https://stackoverflow.com/questions/42182233" in first.source
        assert "$G = [0, -1]$" in first.source and "leaves out1 unchanged?" in first.source


LISTED = """import torch_or_anything_not_installed


def first(x):
    \"\"\"Doc.\"\"\"

    return x + 1   # kept as written


@staticmethod
class Second:
    pass
"""


def test_listing_shows_functions_as_they_stand_in_their_file(tmp_path, monkeypatch, capsys):
    path = tmp_path / "fx.py"
    path.write_text(LISTED)
    shown = tutorial.listing(path, "first", "Second", label="PyTorch")     # the file is not imported
    first = 'def first(x):\n    \"\"\"Doc.\"\"\"\n\n    return x + 1   # kept as written'
    assert str(shown) == ("\n--- PyTorch: fx.py, first ---\n" + textwrap.indent(first, "    ") + "\n"
                          "\n--- PyTorch: fx.py, Second ---\n    @staticmethod\n    class Second:\n        pass\n")
    second = "@staticmethod\nclass Second:\n    pass"
    assert shown._repr_markdown_() == (f"`PyTorch: fx.py, first`\n\n```python\n{first}\n```\n\n"
                                       f"`PyTorch: fx.py, Second`\n\n```python\n{second}\n```")
    monkeypatch.setattr(tutorial, "HEADLESS", True)                 # run as a script: printed
    assert tutorial.listing(path, "first", label="PyTorch") is None
    assert capsys.readouterr().out == "\n--- PyTorch: fx.py, first ---\n" + textwrap.indent(first, "    ") + "\n"
    with pytest.raises(ValueError, match=r"^names: expected functions or classes of fx.py, got \['third'\]"):
        tutorial.listing(path, "first", "third")


def test_show_stages_prints_the_cli_lines(capsys):
    net, X, _ = seed_setup()
    tutorial.show_stages(net.backward(net.forward(X), G_QUESTION).stages, net)
    out = capsys.readouterr().out
    assert "dW2 = a1.T @ dz2   shape (4, 2)" in out
    assert "dz1 = da1 * sigmoid'(z1)   shape (8, 4)" in out


def test_tutorial_helpers_do_not_import_matplotlib():
    code = "import sys, mlp_ref.classroom.tutorial; print('matplotlib' in sys.modules)"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.stdout.strip() == "False", res.stderr


# -- the numbers each tutorial prints, recomputed ----------------------------------------------
@pytest.mark.slow
def test_01_prints_the_stages_facts_and_the_gradient_check(outputs):
    net, X, _ = seed_setup()
    back = net.backward(net.forward(X), G_QUESTION)
    out = outputs["01_forward_backward.py"].stdout
    same = bool(np.all(back.stages["da1"] == -net.params["W2"][:, 1]))
    assert f"every row of da1 equals -W2[:, 1]: {same}" in out
    zeros = (np.count_nonzero(back.grads["W1"] == 0.0), np.count_nonzero(back.grads["b1"] == 0.0))
    assert (f"entries of dW1 that are zero: {zeros[0]} of 12   entries of db1 that are zero: "
            f"{zeros[1]} of 4") in out
    report_ = mr.gradcheck.check(net, X, G_QUESTION)
    last = [line for line in out.splitlines() if line.startswith("max rel_error")]
    assert last == [f"max rel_error {report_.max_rel_error:.2e} (tol 1e-07): PASS"]


@pytest.mark.slow
def test_01_prints_every_weight_and_a_stage_to_check_by_hand(outputs):
    net, X, _ = seed_setup()
    printed = io.StringIO()
    with redirect_stdout(printed):
        tutorial.show_params(net)
    out = outputs["01_forward_backward.py"].stdout
    assert printed.getvalue() in out and printed.getvalue().count("shape") == 4
    by_hand = X[0] @ net.params["W1"][:, 0] + net.params["b1"][0]
    assert by_hand == pytest.approx(net.forward(X).z[1][0, 0], abs=1e-15)
    assert f"by hand: X[0] @ W1[:, 0] + b1[0] = {by_hand:.4f}   z1[0, 0] = {by_hand:.4f}" in out
    from mlp_ref.classroom import cli
    with redirect_stdout(io.StringIO()) as stages:
        cli.main(["stages"])
    assert printed.getvalue() in stages.getvalue()          # and `python -m mlp_ref stages`


@pytest.mark.slow
def test_02_prints_each_layers_share_and_the_dense_jacobian(outputs, setups):
    out = outputs["02_the_question.py"].stdout
    for net, X, _ in setups.values():
        K = jacobian.tangent_kernel_by_layer(net, X, 0, 1)
        zero = bool(np.all(K[net.depth] == 0.0))
        assert f"output layer's share is exactly zero in every entry: {zero}" in out
    assert out.count("output layer's share is exactly zero in every entry:") == 2
    net, X, _ = setups["seed"]
    J1 = jacobian.dense_rows(net, X, keep=[0])
    column = jacobian.unflatten(np.arange(26), net.params)
    out2s_own = [int(c) for c in (*column["W2"][:, 1], column["b2"][1])]
    zero_columns = int(np.sum(np.all(J1[:, out2s_own] == 0.0, axis=0)))
    assert f"(columns {out2s_own}) that are exactly 0 in every row: {zero_columns} of 5" in out
    assert out.count("equal to tangent_kernel_by_layer to ") == 2
    # "a few small entries of the W1 columns print as 0. or -0.: small, not zero"
    W1 = J1[:, :net.params["W1"].size]
    assert np.all(W1 != 0.0) and 0 < np.sum(np.abs(W1) < 5e-4) < W1.size / 4


@pytest.mark.slow
def test_02_prints_the_first_order_errors_of_first_order_drift(outputs):
    out = outputs["02_the_question.py"].stdout
    for name in ("seed", "visible"):
        fo = question.first_order_drift(name)
        for lr, actual, err in zip(fo["lrs"], fo["actual"], fo["rel_error"]):
            assert f"  {lr:6.0e} {np.max(np.abs(actual)):14.3e} {err:16.2e}" in out


@pytest.mark.slow
def test_03_prints_whether_the_mask_changes_the_step(outputs):
    out = outputs["03_masking.py"].stdout
    assert out.count("masked == naive on every parameter: True") == 2
    assert out.count("masked == naive on every parameter: False") == 1


@pytest.mark.slow
def test_04_prints_the_held_outputs_and_the_capacity_table(outputs, capacity):
    out = outputs["04_layer_splitting.py"].stdout
    lines = [line for line in out.splitlines() if "out1 identical on batch and unseen inputs" in line]
    assert len(lines) == 10 and all("inputs: True" in line for line in lines)
    assert report.format_capacity(capacity) in out
    assert "the same curve as splitting.out2_capacity's, bit for bit: True" in out


@pytest.mark.slow
def test_05_prints_the_fitted_slopes_and_the_rank_of_J1(outputs, setups):
    out = outputs["05_projection.py"].stdout
    lrs = np.logspace(-5, -3, 5)
    for name in ("seed", "visible"):
        res = drift.one_step(name, rules=["naive", "project"], lrs=lrs)
        naive, proj = (fits.loglog_slope(lrs, res[r]["drift_batch"]) for r in ("naive", "project"))
        assert f"fitted log-log slopes: naive {naive:.2f}, project {proj:.2f}" in out
    net, X, _ = setups["seed"]
    rank = np.linalg.matrix_rank(jacobian.dense_rows(net, X, keep=[0]))
    assert f"rank of J1 {rank}, condition number" in out


@pytest.mark.slow
def test_06_prints_the_table_the_penalty_limit_and_the_measured_guarantees(outputs, question_table,
                                                                           guarantees, setups):
    from mlp_ref import fixes
    out = outputs["06_side_by_side.py"].stdout
    assert report.format_table(list(question_table.values())) in out
    for name, (net, X, _) in setups.items():
        limit = fixes.penalty_limit(net, X) / LR[name]
        assert f"linearised limit: lam < {limit:.2f} at lr {LR[name]}" in out
    assert report.format_guarantees(guarantees) in out


@pytest.mark.slow
def test_07_without_frameworks_prints_mlp_refs_drift_and_its_slopes(outputs):
    out = outputs["07_from_numpy_to_frameworks.py"].stdout
    lrs = np.logspace(-5, -2, 7)
    for name in ("seed", "visible"):
        res = drift.one_step(name, rules=["naive", "project"], lrs=lrs)
        for rule in ("naive", "project"):
            values = res[rule]["drift_batch"]
            slope = fits.loglog_slope(lrs, values, max_lr=1e-3)
            assert (f"  {rule:8}" + "".join(f"{d:9.1e}" for d in values)
                    + f"   fitted slope {slope:.3f}") in out
    assert "[figure: mlp_ref.plots.frameworks_drift_vs_lr, drawn inline" in out


@pytest.mark.slow
def test_07_without_frameworks_runs_prints_every_function_and_says_what_it_did_not_run(
        outputs):
    res = outputs["07_from_numpy_to_frameworks.py"]
    assert res.returncode == 0, res.stderr[-2000:]
    assert "PyTorch: NOT RUN here, torch is not installed" in res.stdout
    assert "TensorFlow 2: NOT RUN here, tensorflow is not installed" in res.stdout
    assert "JAX: NOT RUN here, jax is not installed" in res.stdout
    assert "Ran here: nothing (no framework installed)" in res.stdout
    blocks = printed_sources(res.stdout)
    assert {name for _, name in blocks} >= {
        "model_from", "naive", "freeze", "masked_loss", "masked", "jacobian", "remove_rows",
        "project", "restore", "penalty", "largest_stable_lam", "adam", "adam_projected",
        "snapshot", "project_with_pinv"}
    for framework in NAMES:
        assert {"naive", "freeze", "project", "restore", "penalty", "adam_projected"} <= {
            name for fw, name in blocks if fw == framework}


# -- narration a class can read ------------------------------------------------------------------
WIDTH = 100           # columns: what a terminal, a projected notebook and GitHub show unbroken
PARAGRAPH = 8         # lines: a paragraph says one thing


def wide_lines(text):
    return [line for line in text.splitlines() if len(line) > WIDTH]


@pytest.mark.slow
@pytest.mark.parametrize("path", TUTORIALS, ids=lambda p: p.name)
def test_every_printed_line_of_a_tutorial_fits_in_100_columns(path, outputs):
    assert wide_lines(outputs[path.name].stdout) == []


@pytest.mark.parametrize("path", TUTORIALS, ids=lambda p: p.name)
def test_the_narration_is_short_paragraphs(path):
    for cell in tutorial.cells(path.read_text()):
        if cell.kind != "markdown":
            continue
        for paragraph in re.split(r"\n\s*\n", cell.source):
            if paragraph.lstrip().startswith(("|", "$$")):       # a table, display math
                continue
            # a list: each item is a paragraph of its own
            for item in re.split(r"\n(?=\s*(?:[-*]|\d+\.) )", paragraph):
                assert len(item.splitlines()) <= PARAGRAPH, item[:200]


def test_06s_span_is_0_0_where_it_says_and_round_off_where_it_says():
    # "its drift is 0.0 in the guarantees' one-step runs on the seed network (lr <= 1e-2) and
    # round-off, not 0.0, elsewhere (the first table: unseen inputs at lr 0.1, and the visible
    # network)"
    from mlp_ref.measurements.table import GUARANTEE_LRS
    seed = drift.one_step("seed", rules=["span"], lrs=GUARANTEE_LRS)["span"]
    assert max(GUARANTEE_LRS) <= 1e-2
    assert np.all(seed["drift_batch"] == 0.0) and np.all(seed["drift_unseen"] == 0.0)
    at_01 = drift.one_step("seed", rules=["span"], lrs=[LR["seed"]])["span"]["drift_unseen"][0]
    visible = drift.one_step("visible", rules=["span"], lrs=[LR["visible"]])["span"]
    for value in (at_01, visible["drift_batch"][0], visible["drift_unseen"][0]):
        assert 0.0 < value <= 1e-12
