"""The exercises and their grader: every solution passes, every blank is "not implemented yet",
and a solution with one deliberate bug fails, naming the stage or rule the bug breaks."""
import ast
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mlp_ref.classroom import grading

ROOT = Path(__file__).resolve().parents[1]
EXERCISES = ROOT / "tutorials" / "exercises"
BLANKS = sorted(EXERCISES.glob("[0-9][0-9]_*.py"))
SOLUTIONS = sorted((EXERCISES / "solutions").glob("[0-9][0-9]_*.py"))


def check(path):
    """(exit status, report) of ``python -m mlp_ref check path``, the file run in this process
    (``isolate=False``: the same checks and feedback, no child process; tests/test_grading.py
    runs the child)."""
    out = io.StringIO()
    status = grading.main(str(path), out=out, isolate=False)
    return status, out.getvalue()


def test_ten_exercises_in_the_order_of_the_tutorials():
    names = [p.stem for p in BLANKS]
    assert names == ["01_layer_backward", "02_masked_loss", "03_freeze", "04_projection",
                     "05_restore", "06_tangent_kernel", "07_gram_trick", "08_span_projection",
                     "09_adam_projection", "10_memory_project"] == list(grading.EXERCISES)
    assert [p.name for p in SOLUTIONS] == [p.name for p in BLANKS]
    after = [int(re.search(r"\(after tutorial (\d\d)", p.read_text()).group(1)) for p in BLANKS]
    assert after == sorted(after[:5]) + after[5:] and set(after) >= {1, 2, 3, 4, 5, 7, 8}
    for blank in BLANKS:                          # a header with the expected time
        assert re.search(r"\nExpected time: \d+ minutes\.\n", blank.read_text()), blank.name


def _predictions(path):
    tree = ast.parse(path.read_text())
    return {t.id: node.value for node in tree.body if isinstance(node, ast.Assign)
            for t in node.targets if isinstance(t, ast.Name) and t.id.startswith("PREDICT_")}


@pytest.mark.parametrize("blank", BLANKS, ids=lambda p: p.stem)
def test_each_exercise_asks_for_predictions_the_grader_checks(blank):
    """Two "predict, then run" constants per exercise (one for 05, which shares tutorial 05 with
    04 and 07): None in the blank, filled in the solution, each with a check."""
    asked, solved = _predictions(blank), _predictions(EXERCISES / "solutions" / blank.name)
    assert list(asked) == list(solved) == list(grading.PREDICTIONS[blank.stem])
    assert len(asked) == (1 if blank.stem == "05_restore" else 2)
    assert all(isinstance(v, ast.Constant) and v.value is None for v in asked.values())
    assert all(isinstance(v, ast.Constant) and v.value is not None for v in solved.values())


def _functions(path):
    tree = ast.parse(path.read_text())
    return {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}


@pytest.mark.parametrize("blank", BLANKS, ids=lambda p: p.stem)
def test_a_blank_is_its_solution_with_the_bodies_left_out(blank):
    ours, theirs = _functions(blank), _functions(EXERCISES / "solutions" / blank.name)
    assert list(ours) == list(theirs)
    graded = set(grading.EXERCISES[blank.stem][1])
    assert graded <= set(ours)
    for name, node in ours.items():
        solved = theirs[name]
        assert ast.dump(node.args) == ast.dump(solved.args), name
        assert ast.get_docstring(node) == ast.get_docstring(solved), name
        if name in graded:
            assert "shape" in ast.get_docstring(node), name
            body = node.body[1:]
            assert len(body) == 1 and isinstance(body[0], ast.Raise), name
            assert ast.unparse(body[0]) == "raise NotImplementedError", name
        else:                                      # given helpers: the same code as the solution
            assert ast.get_docstring(node).startswith("Given"), name
            assert ast.dump(node) == ast.dump(solved), name


@pytest.mark.parametrize("solution", SOLUTIONS, ids=lambda p: p.stem)
def test_every_solution_passes(solution):
    status, out = check(solution)
    assert status == 0, out
    functions = grading.EXERCISES[solution.stem][1]
    for name in functions:
        assert f"  {name} " in out
    predictions = grading.PREDICTIONS[solution.stem]
    assert out.count("PASS") == len(functions) + len(predictions) and "FAIL" not in out
    n = len(functions)
    m = len(predictions)
    assert f"{n} of {n} {'functions' if n > 1 else 'function'} pass. {m} of {m} " \
           f"{'predictions' if m > 1 else 'prediction'} right. All done." in out


@pytest.mark.parametrize("blank", BLANKS, ids=lambda p: p.stem)
def test_a_blank_file_is_not_implemented_yet(blank):
    status, out = check(blank)
    functions = grading.EXERCISES[blank.stem][1]
    assert status == 1
    assert out.count("not implemented yet") == len(functions)
    assert out.count("not answered yet") == len(grading.PREDICTIONS[blank.stem])
    assert "Traceback" not in out and "FAIL" not in out and "PASS" not in out
    n = len(functions)
    assert f"0 of {n} {'functions' if n > 1 else 'function'} pass." in out


#: One deliberate bug per exercise (more for some): the solution's line, the bug, and what the
#: grader must say. Each is a real mistake students make.
BROKEN = {
    "sigmoid' at a, not z": ("01_layer_backward", "return da * s * (1.0 - s)",
                             "return da * z * (1.0 - z)",
                             "two_layer_backward  PASS  passes with our sigmoid_backward"),
    "bias gradient not summed over rows": ("01_layer_backward", "db = dz.sum(axis=0)",
                                           "db = dz.sum(axis=1)", "stage db: shape (6,), expected (4,)"),
    "G without the mask's factor": ("02_masked_loss", "2.0 * mask * r / r.size", "2.0 * r / r.size",
                                    "masked_mse        FAIL  stage G: yours is 2 (mask * out - y) / (n K), "
                                    "without the mask's factor"),
    "the mask on the wrong column": ("02_masked_loss", "np.asarray(mask) * np.asarray(G)",
                                     "(1 - np.asarray(mask)) * np.asarray(G)",
                                     "masked_direction  FAIL  D: yours is the gradient of (1 - mask) * G: "
                                     "the mask inverted"),
    "var_list ignored": ("03_freeze", "(v if k in trainable else np.zeros_like(v))", "v",
                         "freeze    FAIL  stage D['W1']"),
    "out1's bias left trainable": ("03_freeze", '    D[f"b{L}"][hold] = 0.0\n', "",
                                   "own_head  FAIL  stage D['b2']"),
    "projection with the wrong sign": ("04_projection", "g - np.linalg.pinv(J1) @ (J1 @ g)",
                                       "g + np.linalg.pinv(J1) @ (J1 @ g)",
                                       "project_dense  FAIL  D (seed): yours is g + J1^+ J1 g: the "
                                       "projection's sign flipped"),
    "Gram without the bias's 1": ("04_projection", "(A[l] @ A[l].T + 1.0)", "(A[l] @ A[l].T)",
                                  "gram_out1      FAIL  stage gram (seed): yours is sum over layers of "
                                  "(S S^T) * (A A^T): the bias's 1 is missing"),
    "J1 alpha instead of J1^T alpha": ("04_projection", "G_alpha[:, 0] = alpha", "G_alpha[:, 1] = alpha",
                                       "project_gram   FAIL  rule: J1 D must be 0 (seed network)"),
    "restoring uphill": ("05_restore", "unflatten(np.linalg.pinv(J1) @ r", "unflatten(-np.linalg.pinv(J1) @ r",
                         "restore_step  FAIL  stage W1: yours is theta + J1^T (J1 J1^T)^+ (out1 - ref): a step uphill"),
    "no stopping at tol": ("05_restore", "if residual <= tol:", "if residual < 0:",
                           "restore       FAIL  rule: Gauss-Newton converges in a few steps here"),
    "G changed in place to make any answer pass": ("03_freeze", "    g = net.gradient(X, G)\n",
                                                   "    G[...] = 0.0\n    g = net.gradient(X, G)\n",
                                                   "freeze    FAIL  rule: G must not change"),
    "the mask ignored, out1's column zeroed": ("02_masked_loss", "np.asarray(mask) * np.asarray(G)",
                                               "np.asarray(G) * [0.0, 1.0]",
                                               "masked_direction  FAIL  D: yours is the gradient of "
                                               "(1 - mask) * G: the mask inverted"),
    "a fixed tolerance": ("05_restore", "if residual <= tol:", "if residual <= 1e-12:",
                          "restore       FAIL  rule: with tol=1e-6: stop at the first residual"),
    "a step even at ref": ("05_restore", "    for _ in range(max_iter):\n",
                           "    history.append(restore_step(net, X, ref))\n    for _ in range(max_iter - 1):\n",
                           "restore       FAIL  rule: "),
    "a missing return": ("01_layer_backward", "return da * s * (1.0 - s)", "da * s * (1.0 - s)",
                         "sigmoid_backward    FAIL  stage dz: your function returned None (a missing return?)"),
    "exit() in a function": ("01_layer_backward", "    s = sigmoid(z)\n", "    exit()\n",
                             "sigmoid_backward    ERROR called exit (exit()) (line "),
    "a typo that raises": ("01_layer_backward", "    s = sigmoid(z)\n", "    s = sigmoidd(z)\n",
                           "sigmoid_backward    ERROR stage s: raised NameError: name 'sigmoidd' is not defined"
                           " (line "),
}


@pytest.mark.parametrize("bug", BROKEN)
def test_a_solution_with_a_bug_fails_and_says_where(bug, tmp_path):
    exercise, right, wrong, said = BROKEN[bug]
    text = (EXERCISES / "solutions" / f"{exercise}.py").read_text()
    assert text.count(right) == 1, f"the patch no longer applies: {right!r}"
    broken = tmp_path / f"{exercise}.py"
    broken.write_text(text.replace(right, wrong))
    status, out = check(broken)
    assert "Traceback" not in out
    assert status == 1
    assert said in out, out
    assert "hint: " in out or "raised" in said or "called exit" in said


def test_a_direction_with_its_keys_in_another_order_passes(tmp_path):
    """net.step takes D's keys in any order, and so does the grader."""
    text = (EXERCISES / "solutions" / "03_freeze.py").read_text()
    right = "return {k: (v if k in trainable else np.zeros_like(v)) for k, v in g.items()}"
    assert text.count(right) == 1
    reordered = tmp_path / "03_freeze.py"
    reordered.write_text(text.replace(right, "return {k: (g[k] if k in trainable else "
                                             "np.zeros_like(g[k])) for k in reversed(list(g))}"))
    status, out = check(reordered)
    assert status == 0 and "freeze    PASS" in out, out


def test_the_grader_shows_the_finite_difference_beside_ours(tmp_path):
    text = (EXERCISES / "solutions" / "01_layer_backward.py").read_text()
    broken = tmp_path / "mine.py"
    broken.write_text(text.replace("dW = a_prev.T @ dz", "dW = 2 * a_prev.T @ dz"))
    status, out = check(broken)
    line = next(l for l in out.splitlines() if "affine_backward" in l)
    assert status == 1 and "stage dW: worst entry" in line and "finite differences" in line
    yours, ours = (float(line.split(f"{who} ")[1].split(",")[0]) for who in (": yours", ", ours"))
    assert yours == pytest.approx(2 * ours)


@pytest.mark.parametrize("source, said", [
    ("def f(:\n", "syntax error at line 1"),
    ("EXERCISE = '03_freeze'\nimport nump\n", "importing it raised ModuleNotFoundError: No module "
                                               "named 'nump' (line 2)"),
    ("EXERCISE = 'something else'\n", "not one of the exercises"),
    ("EXERCISE = ['03_freeze']\n", "not one of the exercises: expected EXERCISE = one of"),
    ("EXERCISE = '03_freeze'\nimport sys\nsys.exit(0)\n", "importing it called exit (exit(0)) (line 3)"),
])
def test_a_file_that_cannot_be_graded_is_one_line(source, said, tmp_path):
    path = tmp_path / "mine.py"
    path.write_text(source)
    status, out = check(path)
    assert status == 2
    assert out.count("\n") == 1 and out.startswith(f"check: {path}: ") and said in out


@pytest.mark.slow                 # a command in a child process, and another: CPU for its startups
def test_check_is_a_command(tmp_path):
    env_path = str(ROOT)
    res = subprocess.run([sys.executable, "-m", "mlp_ref", "check", str(BLANKS[0])],
                         capture_output=True, text=True, cwd=ROOT,
                         env={**__import__("os").environ, "PYTHONPATH": env_path})
    from mlp_ref.classroom.grading import sandbox        # its one line: the isolation used
    assert res.returncode == 1 and res.stderr == f"check: each file runs in a child process, " \
                                                 f"isolated by {sandbox.choose()}\n"
    assert res.stdout.count("not implemented yet") == 3
    missing = subprocess.run([sys.executable, "-m", "mlp_ref", "check", str(tmp_path / "no.py")],
                             capture_output=True, text=True, cwd=ROOT,
                             env={**__import__("os").environ, "PYTHONPATH": env_path})
    assert missing.returncode == 2 and "cannot read it" in missing.stdout


def test_the_teachers_guide_names_every_exercise_and_function():
    guide = (ROOT / "tutorials" / "README.md").read_text()
    for exercise, (_, functions) in grading.EXERCISES.items():
        assert f"`{exercise}.py`" in guide
        for name in functions:
            assert f"`{name}`" in guide or f"`{name}` (" in guide, name
    assert "eighteen of them" in guide and len(BROKEN) == 18
    for term in ("**G**", "**J₁ (J1)**", "**K₁₂ (K12)**", "**keep, keep_X**", "**null space**",
                 "**Gauss-Newton", "**GPM / span projection**", "**var_list**", "**out1, out2**"):
        assert term in guide, term


def test_a_file_that_is_not_utf8_is_one_line(tmp_path):
    path = tmp_path / "01_layer_backward.py"
    path.write_bytes(b"\xff\xfe def f(): pass\n")
    status, out = check(path)
    assert status == 2 and out == f"check: {path}: not UTF-8 text (byte 0): save it as UTF-8, as Python files are\n"
