"""The grader as a class uses it: each submission in a child process, hostile files reported in
one line within their time limit and never passing, feedback that names the usual mistakes, and
a gradebook of a folder.

The child-process tests start a Python with NumPy each (about a second): all but one are
marked slow. The feedback tests grade in this process (``isolate=False``: the same checks, the
same wire format, no child) and are fast.
"""
import csv
import io
import os
import time
from pathlib import Path

import numpy as np
import pytest

from mlp_ref.classroom import grading
from mlp_ref.classroom.grading import hints, wire

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "tutorials" / "exercises" / "solutions"
HOSTILE = Path(__file__).resolve().parent / "fixtures" / "grading"

#: The child's limits in these tests: small, so that a hostile file costs little.
LIMIT_S = 3.0
MEMORY = 768 * 2 ** 20


def run(paths, isolate=True, **kwargs):
    out, err = io.StringIO(), io.StringIO()
    status = grading.main(paths, out=out, isolate=isolate, progress=err, **kwargs)
    return status, out.getvalue()


def mistake(tmp_path, exercise, right, wrong, name=None):
    text = (SOLUTIONS / f"{exercise}.py").read_text()
    assert text.count(right) == 1, f"the patch no longer applies: {right!r}"
    path = tmp_path / (name or f"{exercise}.py")
    path.write_text(text.replace(right, wrong))
    return path


# -- feedback that finds the mistake (fast: in this process) -----------------------------------
#: The mistakes issue 29 lists, as patches of the solutions, and what the grader must say:
#: (exercise, the solution's text, the mistake, [the lines the report must hold]).
MISTAKES = {
    "a forgotten transpose (dz @ W)": (
        "01_layer_backward", "da_prev = dz @ W.T", "da_prev = dz @ W",
        ["affine_backward     ERROR stage da_prev: raised ValueError (line ",
         "hint: dz (6, 4) @ W (3, 4): the inner sizes differ (4 and 3); da_prev = dz @ W.T?",
         "two_layer_backward  PASS  passes with our affine_backward (yours fails: fix it)"]),
    "a sum over the wrong axis that breaks broadcasting": (
        "01_layer_backward", "return da * s * (1.0 - s)", "return da * s * (1.0 - s).sum(axis=1)",
        ["sigmoid_backward    ERROR raised ValueError (line ",
         "(1.0 - s).sum(axis=1) (5,) do not broadcast: one of them lost an axis"]),
    "the sign of sigmoid' flipped, s * (s - 1)": (
        "01_layer_backward", "return da * s * (1.0 - s)", "return da * s * (s - 1.0)",
        ["sigmoid_backward    FAIL  stage dz: yours is da * s * (s - 1): the derivative negated",
         "two_layer_backward  PASS  passes with our sigmoid_backward (yours fails: fix it)"]),
    "dW transposed": (
        "01_layer_backward", "dW = a_prev.T @ dz", "dW = dz.T @ a_prev",
        ["affine_backward     FAIL  stage dW: shape (4, 3), expected (3, 4) (transposed?)"]),
    "divided by n, not n K": (
        "02_masked_loss", "2.0 * mask * r / r.size", "2.0 * mask * r / len(r)",
        ["masked_mse        FAIL  stage G: yours is 2 mask (mask * out - y) / n: divided by n, not n K"]),
    "the mask applied twice (to out and y)": (
        "02_masked_loss", "r = mask * out - y", "r = mask * (out - y)",
        ["masked_mse        FAIL  stage loss: yours is mean((mask * (out - y))^2)",
         "hint: the mask applied twice, to out and to y"]),
    "pinv(J1 @ J1.T), which tutorial 05 warns against": (
        "04_projection", "g - np.linalg.pinv(J1) @ (J1 @ g)",
        "g - J1.T @ np.linalg.pinv(J1 @ J1.T) @ (J1 @ g)",
        ["project_dense  FAIL  D (seed): yours is g - J1^T pinv(J1 J1^T) J1 g: pinv of J1 J1^T "
         "squares J1's condition number (cond(J1 J1^T) = 2.4e+11 here)",
         "hint: use np.linalg.pinv(J1)", "as tutorial 05 warns",
         "project_gram   PASS"]),
    "a bug in gram_out1 is not blamed on project_gram": (
        "04_projection", "(A[l] @ A[l].T + 1.0)", "(A[l] @ A[l].T)",
        ["gram_out1      FAIL  stage gram (seed): yours is sum over layers of (S S^T) * (A A^T): "
         "the bias's 1 is missing",
         "project_gram   PASS  passes with our gram_out1 (yours fails: fix it)"]),
    "a restoring step uphill": (
        "05_restore", "unflatten(np.linalg.pinv(J1) @ r", "unflatten(-np.linalg.pinv(J1) @ r",
        ["restore_step  FAIL  stage W1: yours is theta + J1^T (J1 J1^T)^+ (out1 - ref): a step uphill",
         "restore       PASS  passes with our restore_step (yours fails: fix it)"]),
}


#: Exercise 07: the student's Gram from the factors, and the solution's J1 D
GRAM_LINE = "    G = sum((S[l] @ S[l].T) * (A[l] @ A[l].T + 1.0) for l in A)\n"
JVP_LINE = '    return sum(np.sum(S[l] * (A[l] @ D[f"W{l}"] + D[f"b{l}"]), axis=1) for l in A)\n'


#: One or two real mistakes per new exercise (06-10), and a wrong prediction: each fails, and
#: says what the check found.
MISTAKES.update({
    "K11 for K12": (
        "06_tangent_kernel", "return jacobian_rows(net, X, 0) @ jacobian_rows(net, X, 1).T",
        "return jacobian_rows(net, X, 0) @ jacobian_rows(net, X, 0).T",
        ["cross_kernel     FAIL  stage K12 (seed): yours is J1 @ J1.T, out1's own kernel K11"]),
    "the kernel's share without the bias's 1": (
        "06_tangent_kernel", "(A[l] @ A[l].T + 1.0)", "(A[l] @ A[l].T)",
        ["kernel_by_layer  FAIL  stage share 1 (seed): worst entry"]),
    "e_k always e1": (
        "06_tangent_kernel", "    e[k] = 1.0\n    return np.array", "    e[0] = 1.0\n    return np.array",
        ["jacobian_rows    FAIL  stage J2 (seed): worst entry",
         "PASS  passes with our jacobian_rows (yours fails: fix it)"]),
    "a wrong prediction": (
        "06_tangent_kernel", "PREDICT_NAIVE_DRIFT_ORDER = 1", "PREDICT_NAIVE_DRIFT_ORDER = 2",
        ["PREDICT_NAIVE_DRIFT_ORDER   FAIL  you predicted 2; the run says ", "1 of 2 predictions right."]),
    "J1^T alpha without the bias's sum": (
        "07_gram_trick", 'D[f"b{l}"] = weighted.sum(axis=0)', 'D[f"b{l}"] = 0 * weighted.sum(axis=0)',
        ["vjp_out1  FAIL  stage J1^T alpha (seed): yours is J1^T alpha with the bias's sum left out"]),
    "J1 D without the bias": (
        "07_gram_trick", '(A[l] @ D[f"W{l}"] + D[f"b{l}"])', '(A[l] @ D[f"W{l}"])',
        ["jvp_out1  FAIL  stage J1 D (seed): yours is J1 D without the biases' part"]),
    # exercise 07's mistakes, written as a student would (issue 38): each one named
    "alpha * S[l]: one weight per row broadcast along the columns": (
        "07_gram_trick", "weighted = alpha[:, None] * S[l]", "weighted = alpha * S[l]",
        ["vjp_out1  ERROR stage weighted: raised ValueError (line ",
         "hint: alpha (8,) * S[l] (8, 4) do not broadcast: alpha has one entry per row, and a vector "
         "lines up with the last axis (the columns): alpha[:, None] makes it a column"]),
    "a transpose too many in J1 D": (
        "07_gram_trick", '(A[l] @ D[f"W{l}"] + D[f"b{l}"])', '(A[l] @ D[f"W{l}"].T + D[f"b{l}"])',
        ["jvp_out1  ERROR raised ValueError (line ",
         "hint: A[l] (8, 3) @ D[f'W{l}'].T (4, 3): the inner sizes differ (3 and 4); A[l] @ D[f'W{l}']?"]),
    "the outer product's factors swapped": (
        "07_gram_trick", 'D[f"W{l}"] = A[l].T @ weighted', 'D[f"W{l}"] = weighted.T @ A[l]',
        ["vjp_out1  FAIL  stage J1^T alpha (seed): yours is S_l^T (alpha A_l) for W_l: the outer "
         "product's factors swapped", "hint: W_l = A_l.T @ (alpha[:, None] * S_l)"]),
    "alpha left out of J1^T alpha": (
        "07_gram_trick", "weighted = alpha[:, None] * S[l]", "weighted = S[l]",
        ["vjp_out1  FAIL  stage J1^T alpha (seed): yours is J1^T 1: alpha left out"]),
    "the Gram's inverse in J1^T alpha": (
        "07_gram_trick", "    D = {}\n", GRAM_LINE + "    alpha = np.linalg.solve(G, alpha)\n    D = {}\n",
        ["vjp_out1  FAIL  stage J1^T alpha (seed): yours is J1^T (J1 J1^T)^-1 alpha: the Gram's "
         "inverse belongs to the projection", "hint: J1^T alpha is a product, no solve"]),
    "the Gram's inverse in J1 D": (
        "07_gram_trick", JVP_LINE, GRAM_LINE + JVP_LINE.replace("return sum(", "return np.linalg.solve(G, sum(")
        .replace("for l in A)", "for l in A))"),
        ["jvp_out1  FAIL  stage J1 D (seed): yours is (J1 J1^T)^-1 J1 D: the Gram's inverse belongs"]),
    "a matrix product where each row needs its own dot product": (
        "07_gram_trick", 'np.sum(S[l] * (A[l] @ D[f"W{l}"] + D[f"b{l}"]), axis=1)',
        '(A[l] @ D[f"W{l}"] + D[f"b{l}"]) @ S[l].T',
        ["jvp_out1  FAIL  stage J1 D (seed): shape (8, 8), expected (8,): a matrix product"]),
    "a sum over the rows too": (
        "07_gram_trick", 'D[f"b{l}"]), axis=1)', 'D[f"b{l}"]))',
        ["jvp_out1  FAIL  stage J1 D (seed): one number, expected one per row (8,): the sum ran "
         "over the rows too", "hint: np.sum(..., axis=1)"]),
    "span projection of out2's column too": (
        "08_span_projection", "cols = slice(None) if l < net.depth else [0]", "cols = slice(None)",
        ["span_project   FAIL  D: yours is every output column projected in the output layer"]),
    "the output layer counted as frozen": (
        "08_span_projection", "if l < net.depth and np.linalg", "if np.linalg",
        ["frozen_layers  FAIL  rule: with a memory of 32 rows the frozen hidden layers are [1, 2], "
         "yours [1, 2, 3]"]),
    "Adam without its bias corrections": (
        "09_adam_projection", "lr * (m[k] / (1 - beta1 ** t)) / (np.sqrt(v[k] / (1 - beta2 ** t)) + eps)",
        "lr * m[k] / (np.sqrt(v[k]) + eps)",
        ["adam_update   FAIL  U (step 1): yours is U without the bias corrections"]),
    "no restoring steps": (
        "10_memory_project", "        for _ in range(10):\n", "        for _ in range(0):\n",
        ["hold_on_memory  FAIL  rule: target 1: out1 held on the memory to 1e-10 after 20 steps"]),
    "a step ten times too small": (
        "10_memory_project", "net.params), lr)", "net.params), lr / 10)",
        ["hold_on_memory  FAIL  rule: target 2: out2 raised on X by at least half the naive gain"]),
})


@pytest.mark.parametrize("name", MISTAKES)
def test_a_usual_mistake_is_named(name, tmp_path):
    exercise, right, wrong, said = MISTAKES[name]
    status, out = run(mistake(tmp_path, exercise, right, wrong), isolate=False)
    assert status == 1 and "Traceback" not in out
    for line in said:
        assert line in out, (line, out)


def test_a_right_function_that_fails_through_a_wrong_callee_is_reported_right(tmp_path):
    """two_layer_backward is right; it calls sigmoid_backward, which is wrong. Graded again with
    the grader's sigmoid_backward standing in, it passes: it is reported as right, and its line
    says so (issue 38: no false blame)."""
    path = mistake(tmp_path, "01_layer_backward", "return da * s * (1.0 - s)",
                   "return da * s * (1.0 - s) * 1.5")
    status, out = run(path, isolate=False)
    lines = [l for l in out.splitlines() if "FAIL" in l]
    assert status == 1 and len(lines) == 1, out
    assert lines[0].startswith("  sigmoid_backward    FAIL  stage dz: worst entry")
    assert "  two_layer_backward  PASS  passes with our sigmoid_backward (yours fails: fix it)\n" in out
    assert "affine_backward     PASS\n" in out


def test_a_function_with_a_mistake_of_its_own_behind_a_wrong_callee_is_told_both(tmp_path):
    """two_layer_backward reverses dz1's rows (its own mistake) and calls a wrong
    sigmoid_backward: with the grader's sigmoid_backward standing in it still fails, and says so."""
    text = (SOLUTIONS / "01_layer_backward.py").read_text()
    own = 'stages["dz1"] = sigmoid_backward(stages["da1"], z1)'
    assert text.count(own) == 1
    path = mistake(tmp_path, "01_layer_backward", "return da * s * (1.0 - s)", "return da * s * (s - 1.0)")
    path.write_text(path.read_text().replace(own, own + "[::-1]"))
    status, out = run(path, isolate=False)
    line = next(l for l in out.splitlines() if l.startswith("  two_layer_backward"))
    assert status == 1 and "; it calls sigmoid_backward, which fails, but fails with a right one " \
                              "too: stage dz1: worst entry" in line, out


def test_pinv_of_the_gram_fails_only_on_the_ill_conditioned_network():
    """The tolerance of project_dense comes from cond(J1): 100 eps cond(J1) on the seed network
    (about 1e-8), between the error of pinv(J1) (eps cond(J1), about 1e-10 at most) and that of
    pinv(J1 J1^T) (eps cond(J1)^2 by the bound; 1e-7 measured, tutorial 05)."""
    from mlp_ref import fixes, jacobian
    from mlp_ref.setups import G_QUESTION, seed_setup
    net, X, _ = seed_setup()
    J = jacobian.dense_rows(net, X, keep=[0])
    g = jacobian.flatten(net.gradient(X, G_QUESTION))
    ref = jacobian.flatten(fixes.project(net, X, G_QUESTION))
    tol = 100 * np.finfo(float).eps * np.linalg.cond(J)
    good = g - np.linalg.pinv(J) @ (J @ g)
    square = g - J.T @ np.linalg.pinv(J @ J.T) @ (J @ g)
    scale = np.abs(g).max()
    assert np.abs(good - ref).max() / scale < tol < np.abs(square - ref).max() / scale


def test_the_hint_of_a_matmul_comes_from_the_shapes_not_the_message():
    names = {"dz": np.zeros((8, 2)), "W": np.zeros((4, 2)), "a_prev": np.zeros((8, 4))}
    for line, stage, hint in [
            ("da_prev = dz @ W\n", "da_prev", "da_prev = dz @ W.T?"),
            ("dW = dz @ a_prev\n", "dW", "dW = dz.T @ a_prev?"),
            ("stages['da1'] = dz @ W\n", "da1", "da1 = dz @ W.T?")]:
        try:
            eval(line.split("=", 1)[1], {}, names)
        except ValueError as exc:
            got = hints.hint_for(exc, names, line)
        assert got[0] == stage and got[1].endswith(hint), got
    assert hints.hint_for(TypeError("x"), names, "y = dz @ W\n") == ("y", "")


@pytest.mark.parametrize("encoding, text", [
    ("utf-8-sig", "# ünïcode\n"),
    ("latin-1", "# -*- coding: latin-1 -*-\n# é à ü\n")])
def test_a_file_with_a_bom_or_a_coding_line_is_graded(encoding, text, tmp_path):
    source = text + (SOLUTIONS / "03_freeze.py").read_text()
    path = tmp_path / "03_freeze.py"
    path.write_bytes(source.encode(encoding))
    status, out = run(path, isolate=False)
    assert status == 0, out


def test_a_fifo_is_refused_before_it_is_opened(tmp_path):
    fifo = tmp_path / "x.py"
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this OS")
    os.mkfifo(fifo)
    started = time.monotonic()
    status, out = run(fifo)
    assert status == 2 and out == f"check: {fifo}: not a Python file: a FIFO\n"
    assert time.monotonic() - started < 5


# -- what crosses from the child: plain data only ---------------------------------------------
def test_the_wire_carries_plain_data_and_refuses_the_rest():
    class Mine(np.ndarray):
        pass
    sent = {"a": np.arange(6.0).reshape(2, 3), "t": (1, 2.5, float("nan"), None, "s"),
            "sub": np.zeros(3).view(Mine), "obj": np.array([object()]), "f": lambda: 0}
    got = wire.decode(wire.encode(sent))
    assert type(got["a"]) is np.ndarray and np.array_equal(got["a"], sent["a"])
    assert got["t"][:2] == (1, 2.5) and np.isnan(got["t"][2]) and got["t"][3:] == (None, "s")
    assert got["sub"] == wire.Other("Mine (a subclass of numpy's ndarray)")
    assert got["obj"] == wire.Other("ndarray of object") and isinstance(got["f"], wire.Other)


def test_the_wire_never_unpickles():
    import pickle
    buffer = io.BytesIO()
    np.savez(buffer, skeleton=np.frombuffer(b'{"array": 0}', dtype=np.uint8),
             a0=np.array([{"x": 1}], dtype=object))
    with pytest.raises(wire.BadFrame):
        wire.decode(buffer.getvalue())
    with pytest.raises(wire.BadFrame):
        wire.decode(pickle.dumps({"result": 1}))


# -- the child process -------------------------------------------------------------------------
def test_a_file_that_exits_at_import_is_one_line_and_never_passes():
    status, out = run(HOSTILE / "fake_report.py", time_limit=LIMIT_S)
    assert status == 2 and out.count("\n") == 1
    assert out == (f"check: {HOSTILE / 'fake_report.py'}: the process running it ended (exit "
                   f"status 0) while importing it\n")


#: Each hostile file and what the grader says of it: one line for the file, or per function.
HOSTILE_SAID = {
    "exit_at_import.py": ["the process running it ended (exit status 0) while importing it"],
    "exit_in_function.py": [
        "sigmoid_backward    ERROR the process running it ended (exit status 0) during the call",
        "affine_backward     ERROR called exit (exit(3)) (line 11)",
        "two_layer_backward  ERROR called exit (exit(0)) (line 16)"],
    "closes_its_output.py": [
        "sigmoid_backward    ERROR raised ValueError: I/O operation on closed file. (line 11)",
        "affine_backward     ERROR the process running it ended",
        "two_layer_backward  not implemented yet"],
    "hangs.py": [f"sigmoid_backward    ERROR still running after {LIMIT_S:g} s (an endless loop?): stopped",
                 f"affine_backward     ERROR still running after {LIMIT_S:g} s (an endless loop?): stopped",
                 "two_layer_backward  not implemented yet"],
    "hangs_at_import.py": [f"importing it took more than {LIMIT_S:g} s (an endless loop at the top level?)"],
    "allocates_20_gb.py": ["sigmoid_backward    ERROR stage big: raised MemoryError",
                           "affine_backward     ERROR raised MemoryError"],
    "patches_the_grader.py": ["masked_mse        FAIL  stage loss: worst entry",
                              "masked_direction  FAIL  stage D['W1']: worst entry"],
    "raises_anything.py": ["jacobian_out1  ERROR raised KeyboardInterrupt (line 9)",
                           "project_dense  ERROR raised GeneratorExit (line 13)",
                           "gram_out1      ERROR raised Sneaky: not an Exception (line 17)",
                           "project_gram   ERROR raised TimedOut (line 22)"],
    "uses_the_package.py": [
        "jacobian_out1  FAIL  calls jacobian.dense_rows, mlp_ref's own implementation",
        "project_dense  FAIL  calls fixes.project_dense, mlp_ref's own implementation",
        "gram_out1      FAIL  calls jacobian.OutputJacobian.__init__, mlp_ref's own implementation",
        "project_gram   FAIL  calls fixes.project, mlp_ref's own implementation"],
    # the child imports the lesson from a view that holds no solutions (and the guard refuses
    # the solutions folder itself: tests/test_attacks.py)
    "execs_the_solutions.py": ["importing it raised FileNotFoundError: ", "(line 8)"],
    "reloads_the_package.py": ["importing it raised PermissionError: ",
                               "the grader keeps mlp_ref's code out of reach (import only what the "
                               "exercise imports) (line 7)"],
    "returns_liars.py": [
        "sigmoid_backward    FAIL  stage dz: not an array of the expected shape (5, 4): got Mine "
        "(a subclass of numpy's ndarray)",
        "affine_backward     FAIL  stage dW: not an array of the expected shape (3, 4): got Liar",
        "two_layer_backward  FAIL  stage dout: not an array of the expected shape (8, 2): got function"],
    # each child has a temporary folder of its own (TMPDIR): the second finds no marker
    "fails_its_second_import.py": [
        f"sigmoid_backward    ERROR still running after {LIMIT_S:g} s (an endless loop?): stopped",
        "affine_backward     FAIL  expected a tuple (dW, db, da_prev), got NoneType",
        "two_layer_backward  FAIL  expected a dict of stages, got NoneType"],
    "talks_on_the_channel.py": [
        "sigmoid_backward    ERROR the process sent something that is not an answer",
        "affine_backward     ERROR the process sent something that is not an answer"],
}


@pytest.mark.slow
@pytest.mark.parametrize("name", HOSTILE_SAID)
def test_a_hostile_file_is_reported_in_one_line_and_never_passes(name, monkeypatch):
    monkeypatch.setattr(grading.runner, "MEMORY_LIMIT", MEMORY)
    monkeypatch.setattr(grading, "MEMORY_LIMIT", MEMORY)
    path = HOSTILE / name
    started = time.monotonic()
    result = grading.grade_file(path, time_limit=LIMIT_S, memory_limit=MEMORY)
    took = time.monotonic() - started
    text = grading.report(result)
    assert result.status != 0 and "PASS" not in text and "Traceback" not in text, text
    for line in HOSTILE_SAID[name]:
        assert line in text, (line, text)
    if result.problem:
        assert text.count("\n") == 0
    else:                                         # one line per function, and hint lines
        lines = text.splitlines()
        for function in grading.EXERCISES[result.exercise][1]:
            assert len([l for l in lines if l.startswith(f"  {function} ")]) == 1, (function, text)
        verdicts = [l for l in lines if l.startswith("  ") and not l.lstrip().startswith("hint:")]
        assert len(verdicts) == len(result.verdicts) + 1 + len(result.predictions)   # + the header
    # every function within its limit, plus the child's start (a second or two) for each
    # child started again after one was stopped
    assert took < (LIMIT_S + 4) * (len(result.verdicts) + 1), took


@pytest.mark.slow
def test_a_fake_answer_from_the_package_is_caught_even_when_the_tripwire_is_caught(tmp_path):
    """gram_out1 of uses_the_package.py catches the tripwire's exception and returns np.eye:
    reported as a call of the package, not as a wrong value."""
    result = grading.grade_file(HOSTILE / "uses_the_package.py", time_limit=LIMIT_S)
    gram = next(v for v in result.verdicts if v.function == "gram_out1")
    assert gram.status == "FAIL" and gram.what.startswith("calls jacobian.OutputJacobian")


@pytest.mark.slow
@pytest.mark.parametrize("solution", sorted(SOLUTIONS.glob("[0-9][0-9]_*.py")), ids=lambda p: p.stem)
def test_every_solution_passes_in_the_child(solution):
    result = grading.grade_file(solution, time_limit=30)
    assert result.status == 0, grading.report(result)


@pytest.mark.slow
def test_a_helper_module_beside_the_file_is_imported(tmp_path):
    text = (SOLUTIONS / "01_layer_backward.py").read_text()
    body = text[text.index("def sigmoid(z)"):text.index("def sigmoid_backward")]
    (tmp_path / "my_helpers.py").write_text("import numpy as np\n\n\n" + body)
    start = text.index("def sigmoid(z)")
    mine = text[:start] + "from my_helpers import sigmoid\n\n\n" + text[text.index("def sigmoid_backward"):]
    (tmp_path / "01_layer_backward.py").write_text(mine)
    status, out = run(tmp_path / "01_layer_backward.py", time_limit=30)
    assert status == 0, out


@pytest.mark.slow
def test_the_gradebook_of_a_folder_mixing_right_wrong_and_hostile_files(tmp_path):
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "alice_01.py").write_text((SOLUTIONS / "01_layer_backward.py").read_text())
    mistake(folder, "01_layer_backward", "return da * s * (1.0 - s)", "return da * s * (s - 1.0)",
            name="01_layer_backward_bob.py")
    (folder / "carol.py").write_text((HOSTILE / "exit_at_import.py").read_text())
    (folder / "dave.py").write_text((HOSTILE / "uses_the_package.py").read_text())
    (folder / "erin.py").write_text((SOLUTIONS / "03_freeze.py").read_text())
    (folder / "_helpers.py").write_text("def helper():\n    return 1\n")     # not a submission
    book = tmp_path / "book.csv"
    out, err = io.StringIO(), io.StringIO()
    status = grading.main([folder], out=out, progress=err, gradebook=book, time_limit=LIMIT_S)
    assert status == 2                            # carol's file cannot be graded
    rows = list(csv.DictReader(book.open()))
    by_file = {Path(r["file"]).name: r for r in rows}
    assert list(by_file) == ["01_layer_backward_bob.py", "_helpers.py", "alice_01.py", "carol.py",
                             "dave.py", "erin.py"]
    assert by_file["_helpers.py"]["note"] == "a helper module (its name starts with _): not graded"
    assert list(rows[0])[:6] == ["file", "exercise", "score", "max_score", "passed", "total"]
    functions01 = list(grading.EXERCISES["01_layer_backward"][1])
    assert [by_file["alice_01.py"][f] for f in functions01] == ["PASS"] * 3
    # passed and total count the functions and the predictions: 3 + 2
    assert (by_file["alice_01.py"]["passed"], by_file["alice_01.py"]["total"]) == ("5", "5")
    assert by_file["alice_01.py"]["PREDICT_DW2_COLUMN0"] == "PASS"
    # bob's two_layer_backward is right: it passes with our sigmoid_backward standing in
    assert [by_file["01_layer_backward_bob.py"][f] for f in functions01] == ["FAIL", "PASS", "PASS"]
    assert by_file["carol.py"]["exercise"] == "01_layer_backward"
    assert by_file["carol.py"]["passed"] == "0" and "while importing it" in by_file["carol.py"]["note"]
    # a file that cannot be graded counts against its exercise's whole total, ERROR in each column
    assert by_file["carol.py"]["total"] == "5"
    assert {by_file["carol.py"][f] for f in grading.graded("01_layer_backward")} == {"ERROR"}
    assert [by_file["dave.py"][f] for f in grading.EXERCISES["04_projection"][1]] == ["FAIL"] * 4
    assert by_file["erin.py"]["exercise"] == "03_freeze" and by_file["erin.py"]["passed"] == "4"
    assert by_file["erin.py"]["sigmoid_backward"] == ""
    summary = out.getvalue().splitlines()
    assert len(summary) == 6 and summary[2].endswith("alice_01.py: 01_layer_backward: 5 of 5 pass")
    assert summary[1].endswith("_helpers.py: a helper module (its name starts with _): not graded")
    assert err.getvalue().count("check: [") == 5 and "gradebook of 6 rows (5 files graded" in err.getvalue()


@pytest.mark.slow
def test_check_takes_several_files_and_a_time_limit_on_the_command_line(tmp_path):
    import subprocess
    import sys
    book = tmp_path / "book.csv"
    res = subprocess.run([sys.executable, "-m", "mlp_ref", "check", str(SOLUTIONS / "03_freeze.py"),
                          str(HOSTILE / "hangs.py"), "--time-limit", "1", "--gradebook", str(book)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert res.returncode == 1, res
    assert res.stdout.splitlines()[1].endswith("hangs.py: 01_layer_backward: 0 of 5 pass")
    assert "check: [2/2]" in res.stderr
    assert len(list(csv.DictReader(book.open()))) == 2


def test_the_numbers_the_teachers_guide_states():
    """tutorials/README.md's exercises section: the seed network's conditioning, the bounds it
    gives, the parameters freeze trains, the default time limit and exercise 10's targets."""
    from mlp_ref import jacobian
    from mlp_ref.classroom.grading import answers
    from mlp_ref.setups import seed_setup
    guide = (ROOT / "tutorials" / "README.md").read_text()
    net, X, _ = seed_setup()
    J = jacobian.dense_rows(net, X, keep=[0])
    eps = np.finfo(float).eps
    cond, cond2 = np.linalg.cond(J), np.linalg.cond(J @ J.T)
    assert f"{cond:.0e}" == "5e+05" and f"{cond2:.1e}" == "2.4e+11"
    assert f"{eps * cond2:.0e}" == "5e-05" and f"{eps * cond:.0e}" == "1e-10"
    assert "(5e5 becomes 2.4e11 on the seed network), so ε·cond² ≈ 5e-5" in guide
    assert "ε·cond ≈ 1e-10" in guide
    assert sum(net.params[k].size for k in net.output_keys) == 10 and net.n_params == 26
    assert "10 of the 26 parameters" in guide
    assert grading.TIME_LIMIT == 60 and "60 s by default" in guide
    assert (answers.LR_10, answers.STEPS_10) == (0.01, 20)
    assert "out1 held on the memory to 1e-10 after 20 steps" in guide


@pytest.mark.slow
def test_the_teachers_ctrl_c_stops_the_grader_not_a_student(tmp_path):
    """Ctrl-C reaches the grader's process group only (each child has a session of its own):
    the grader says it was stopped and exits 130; it is not a student's KeyboardInterrupt."""
    import signal
    import subprocess
    import sys
    proc = subprocess.Popen([sys.executable, "-m", "mlp_ref", "check", "--time-limit", "30",
                             str(HOSTILE / "hangs.py")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            start_new_session=True)
    time.sleep(3)                                 # the child is in sigmoid_backward's endless loop
    os.killpg(proc.pid, signal.SIGINT)            # what a terminal's Ctrl-C does to its group
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, (out, err)
    assert out == "check: stopped (Ctrl-C) after 0 of 1 files\n" and "Traceback" not in err


#: Exercise 07 answered through the dense J1 it forbids, as a student would build it (one
#: backward pass per row, flattened by hand: jacobian.flatten is not the exercise's to call)
DENSE_07 = '''
def dense_J1(net, X):
    e1 = np.zeros((1, net.sizes[-1]))
    e1[0, 0] = 1.0
    rows = []
    for i in range(len(X)):
        g = net.gradient(X[i:i + 1], e1)
        rows.append(np.concatenate([g[k].ravel() for k in net.params]))
    return np.array(rows)


def jvp_out1(net, X, D):
    return dense_J1(net, X) @ np.concatenate([D[k].ravel() for k in net.params])


def vjp_out1(net, X, alpha):
    flat = dense_J1(net, X).T @ alpha
    D, start = {}, 0
    for k, v in net.params.items():
        D[k] = flat[start:start + v.size].reshape(v.shape)
        start += v.size
    return D
'''


def test_exercise_07s_networks_hold_a_J1_larger_than_the_childs_memory():
    from mlp_ref.classroom.grading import answers, runner
    net, X, _, _ = answers._no_dense_setup()
    assert len(X) * net.n_params * 8 > runner.MEMORY_LIMIT
    assert list(net.sizes) == list(answers.NO_DENSE_SIZES)


@pytest.mark.slow
def test_the_dense_J1_that_exercise_07_forbids_is_named(tmp_path):
    """Right on the small networks, the dense route cannot build J1 on the large one: both
    functions fail there, and the hint says J1 is never to be built."""
    text = (SOLUTIONS / "07_gram_trick.py").read_text()
    start = text.index("def jvp_out1")
    path = tmp_path / "07_gram_trick.py"
    path.write_text(text[:start] + DENSE_07.lstrip())
    result = grading.grade_file(path, time_limit=20)
    text = grading.report(result)
    for function in ("jvp_out1", "vjp_out1"):
        v = next(v for v in result.verdicts if v.function == function)
        assert v.status in ("ERROR", "FAIL") and "J1 holds 3.1e+08 numbers (2.3 GiB)" in v.hint, text
        assert "never J1" in v.hint


#: Answers that meet a check without the work (issue 38): each must fail, and say where
CHEATS = {
    "exercise 10: out2's bias raised by hand, a history of zeros": (
        "10_memory_project", '    ref = net(memory)[:, 0].copy()\n',
        '    net.params[f"b{net.depth}"][1] += 1000\n    return [0.0] * steps\n',
        "hold_on_memory  FAIL  stage net.params['W1'] after 20 steps: worst entry"),
    "exercise 08: the frozen layers guessed from len(memory)": (
        "08_span_projection", '    A = layer_inputs(net, memory)\n    return [l for l',
        '    return [] if len(memory) < 8 else [1] if len(memory) < 16 else [1, 2]\n'
        '    A = layer_inputs(net, memory)\n    return [l for l',
        "frozen_layers  FAIL  rule: with a memory of 32 rows the frozen hidden layers are [], yours [1, 2]"),
}


@pytest.mark.parametrize("name", CHEATS)
def test_an_answer_that_skips_the_work_fails(name, tmp_path):
    exercise, right, wrong, said = CHEATS[name]
    status, out = run(mistake(tmp_path, exercise, right, wrong), isolate=False)
    assert status == 1 and said in out, out


def test_the_frozen_layers_of_a_memory_are_not_a_function_of_its_rows():
    """Two memories of 32 rows, three answers: only the ranks decide."""
    from mlp_ref.classroom.grading import answers
    net, memories = answers.frozen_layers_memories()
    frozen = {}
    for memory in memories:
        record = net.forward(memory)
        layers = tuple(l for l in range(1, net.depth) if np.linalg.matrix_rank(np.hstack(
            [record.a[l - 1], np.ones((len(memory), 1))])) == net.sizes[l - 1] + 1)
        frozen.setdefault(len(memory), set()).add(layers)
    assert frozen[32] == {(), (2,), (1, 2)}


#: A submission's function that answers every call with its first answer: what a student who
#: copies the answer of one run (the checks' inputs are seeded) would get
REPLAY_FIRST = '''

import copy as _copy
import functools as _functools


def _first(f):
    seen = []

    @_functools.wraps(f)
    def replay(*args, **kwargs):
        if not seen:
            seen.append(f(*args, **kwargs))
        return _copy.deepcopy(seen[0])
    return replay


{name} = _first({name})
'''


@pytest.mark.slow
@pytest.mark.parametrize("exercise, function", [(e, f) for e, (_, checks) in grading.EXERCISES.items()
                                                for f in checks])
def test_no_check_is_met_by_one_runs_answer(exercise, function, tmp_path):
    """Every check asks more than one case (or compares what the function did to the network
    with the reference run): the solution's own first answer, returned for every call, fails."""
    path = tmp_path / f"{exercise}.py"
    path.write_text((SOLUTIONS / f"{exercise}.py").read_text() + REPLAY_FIRST.format(name=function))
    result = grading.grade_file(path, isolate=False)
    verdict = next(v for v in result.verdicts if v.function == function)
    assert verdict.status == "FAIL", grading.report(result)
