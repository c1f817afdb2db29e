"""Bad input, in one table: every wrong argument to every public entry point raises ValueError
or TypeError whose message starts with the argument's name, then says what was expected and what
came; and an input that is unusual but right is accepted."""
import re

import numpy as np
import pytest

import mlp_ref as mr
from mlp_ref import data, fixes, gradcheck, losses, optim
from mlp_ref.setups import seed_setup
from mlp_ref.files import saving

from _nets import X5, direction, net342, param_bytes, record342, torn_record

NET, X, _ = seed_setup()
G = np.array([0.0, -1.0])
REF = NET(X)[:, 0]


def _towers_record_cut(what):
    """TwoTower.backward of a forward record edited by hand: its output's last column dropped, or
    one tower's record made on fewer rows."""
    towers = mr.TwoTower([3, 4, 2])
    record = towers.forward(X)
    if what == "output":
        record.output = record.output[:, :1]
    else:
        record.towers[1] = towers.tower(1).forward(X[:3])
    return towers.backward(record, G)


def _huge_hidden():
    """A [3, 4, 2] identity network whose hidden layer reaches 1e169 while its output stays
    ordinary (W2 scaled down as much as W1 up): a1 a1^T overflows, X does not."""
    net = mr.MLP([3, 4, 2], hidden="identity")
    net.params["W1"] *= 1e170
    net.params["W2"] *= 1e-170
    return net


def _huge_W2():
    """A [3, 4, 2] identity network whose W2 is 1e308 everywhere: finite, but its products are not."""
    net = mr.MLP([3, 4, 2], hidden="identity")
    net.params["W2"][...] = 1e308
    return net


def _nan_W1_identity():
    """A [3, 4, 4, 2] identity network with a NaN in W1, a layer that forward_from(2, ...) does not read."""
    net = mr.MLP([3, 4, 4, 2], hidden="identity", init_std=10)
    net.params["W1"][0, 0] = np.nan
    return net


def torn_inf():
    """A forward record of NET on X with one entry of a1 set to inf by hand."""
    record = NET.forward(X)
    record.a[1][0, 0] = np.inf
    return record


def _far_out():
    """A float32 network whose out1 sits at -3e38: 3e38 - out1 overflows float32."""
    net = mr.MLP([3, 4, 2], dtype=np.float32)
    net.params["b2"][0] = -3e38
    return net


BAD_INPUTS = [
    # MLP(...)
    ("sizes-str", lambda: mr.MLP("3,4,2"), TypeError, r"sizes: expected a list"),
    ("sizes-int", lambda: mr.MLP(3), TypeError, r"sizes: expected a list"),
    ("sizes-set", lambda: mr.MLP({3, 2}), TypeError, r"sizes: expected a list"),
    ("sizes-2d", lambda: mr.MLP([[3, 4, 2]]), TypeError, r"sizes: expected a list"),
    ("sizes-one", lambda: mr.MLP([3]), ValueError, r"sizes: expected at least two"),
    ("sizes-zero", lambda: mr.MLP([3, 0, 2]), ValueError, r"sizes\[1\]: expected a whole number >= 1, got 0"),
    ("sizes-negative", lambda: mr.MLP([3, -4, 2]), ValueError, r"sizes\[1\]: .* got -4"),
    ("sizes-float", lambda: mr.MLP([3, 3.5, 2]), TypeError,
     r"sizes\[1\]: expected a whole number .* got float 3.5"),
    ("sizes-bool", lambda: mr.MLP([3, True]), TypeError, r"sizes\[1\]: .* got bool True"),
    ("sizes-str-item", lambda: mr.MLP([3, "4"]), TypeError, r"sizes\[1\]: "),
    ("hidden-unknown", lambda: net342(hidden="swish"), ValueError,
     r"hidden: unknown activation 'swish'; known: identity, relu, sigmoid, tanh"),
    ("hidden-list-length", lambda: mr.MLP([3, 4, 4, 2], hidden=["tanh"]), ValueError,
     r"hidden: expected one activation name per hidden layer \(2 "),
    ("hidden-list-item", lambda: mr.MLP([3, 4, 4, 2], hidden=["tanh", 3]), TypeError, r"hidden\[1\]: "),
    ("output-unknown", lambda: net342(output="softmax"), ValueError, r"output: unknown activation"),
    ("output-none", lambda: net342(output=None), TypeError, r"output: expected an activation name"),
    ("init_std-negative", lambda: net342(init_std=-0.1), ValueError, r"init_std: expected a number >= 0"),
    ("init_std-nan", lambda: net342(init_std=np.nan), ValueError, r"init_std: expected a finite number"),
    ("init_std-inf", lambda: net342(init_std=np.inf), ValueError, r"init_std: expected a finite number"),
    ("init_std-str", lambda: net342(init_std="0.1"), TypeError, r"init_std: expected a real number"),
    ("seed-negative", lambda: net342(seed=-1), ValueError, r"seed: expected None or a whole number >= 0"),
    ("seed-float", lambda: net342(seed=1.5), TypeError, r"seed: "),
    ("dtype-float16", lambda: net342(dtype=np.float16), ValueError,
     r"dtype: expected np.float64 or np.float32"),
    ("dtype-junk", lambda: net342(dtype="nonsense"), TypeError, r"dtype: expected np.float64 or np.float32"),
    # forward(X)
    ("X-1d-one-sample", lambda: net342().forward(np.ones(3)), ValueError,
     r"X: expected a 2-D array of shape \(n, 3\), got 1-D .*X\.reshape\(1, -1\)"),
    ("X-1d-wrong-length", lambda: net342().forward(np.ones(5)), ValueError,
     r"X: expected a 2-D array .*needs 3 values, not 5"),
    ("X-1d-one-column", lambda: mr.MLP([1, 2]).forward(np.ones(5)), ValueError, r"X: .*X\.reshape\(-1, 1\)"),
    ("X-3d", lambda: net342().forward(np.ones((5, 3, 1))), ValueError, r"X: expected a 2-D array"),
    ("X-scalar", lambda: net342().forward(1.0), ValueError, r"X: expected a 2-D array"),
    ("X-no-rows", lambda: net342().forward(np.ones((0, 3))), ValueError, r"X: expected at least one row"),
    ("X-width", lambda: net342().forward(np.ones((5, 4))), ValueError,
     r"X: expected 3 input columns \(shape \(n, 3\)\), got shape \(5, 4\)"),
    ("X-nan", lambda: net342().forward([[0.0, np.nan, 1.0]]), ValueError,
     r"X: expected finite values, got nan at index \(0, 1\)"),
    ("X-inf", lambda: net342().forward(np.full((2, 3), -np.inf)), ValueError, r"X: expected finite .*6 such"),
    ("X-str-array", lambda: net342().forward(np.array([["1", "2", "3"]])), TypeError,
     r"X: expected a numeric array"),
    ("X-object", lambda: net342().forward(np.array([[1, None, 2]], dtype=object)), TypeError,
     r"X: expected a numeric array"),
    ("X-complex", lambda: net342().forward(np.ones((2, 3)) * 1j), TypeError, r"X: expected real numbers"),
    ("X-none", lambda: net342().forward(None), TypeError, r"X: expected a numeric array"),
    ("X-ragged", lambda: net342().forward([[1, 2, 3], [4, 5]]), TypeError, r"X: expected a numeric array"),
    ("X-too-big-for-float32", lambda: net342(dtype=np.float32).forward([[1e300, 0, 0]]), ValueError,
     r"X: expected values that fit in float32 .* got 1e\+300"),
    # backward(record, G)
    ("record-not-forward", lambda: net342().backward("fwd", [0, 1]), TypeError,
     r"record: expected the Forward record returned by net.forward\(X\)"),
    ("record-other-dtype", lambda: net342(dtype=np.float32).backward(net342().forward(X5), [0, 1]),
     ValueError, r"record: expected every stage in the network's dtype float32, got a0 float64"),
    ("record-other-widths", lambda: net342().backward(mr.MLP([3, 5, 2]).forward(X5), [0, 1]), ValueError,
     r"record: expected a forward record of a network with sizes \[3, 4, 2\], "
     r"got one with widths \[3, 5, 2\]"),
    ("record-deeper", lambda: net342().backward(mr.MLP([3, 4, 2, 2]).forward(X5), [0, 1]), ValueError,
     r"record: expected a forward record of a network with sizes \[3, 4, 2\]"),
    ("record-by-hand", lambda: net342().backward(mr.Forward(X=X5), [0, 1]), ValueError,
     r"record: expected a forward record .*got a keys \[\] and z keys \[\]"),
    ("towers-record-without-output", lambda: mr.TwoTower([3, 4, 2]).backward(
        mr.architectures.TowerForward(X=X5, towers=mr.TwoTower([3, 4, 2]).forward(X5).towers), [0, 1]),
     ValueError, r"record: expected .output, the \(n, 2\) array that forward made, got NoneType None"),
    ("record-torn", lambda: net342().backward(torn_record(), [0, 1]), ValueError,
     r"record: expected every stage of shape \(n, width\) with the n = 5 rows of a0"),
    ("G-shape", lambda: net342().backward(record342(), np.ones((5, 3))), ValueError,
     r"G: expected shape \(5, 2\) or \(2,\), got shape \(5, 3\)"),
    ("G-transposed", lambda: net342().backward(record342(), np.ones((2, 5))), ValueError,
     r"G: .*transposed\? G\.T"),
    ("G-nan", lambda: net342().backward(record342(), [0.0, np.nan]), ValueError,
     r"G: expected finite values"),
    ("G-str", lambda: net342().backward(record342(), "up"), TypeError, r"G: expected a numeric array"),
    # gradient(X, G)
    ("gradient-X", lambda: net342().gradient(np.ones(3), [0, 1]), ValueError, r"X: "),
    ("gradient-G", lambda: net342().gradient(X5, [0, 1, 2]), ValueError, r"G: "),
    # step(D, lr)
    ("lr-zero", lambda: net342().step(direction(net342()), 0.0), ValueError, r"lr: expected a number > 0"),
    ("lr-negative", lambda: net342().step(direction(net342()), -0.1), ValueError,
     r"lr: expected a number > 0"),
    ("lr-nan", lambda: net342().step(direction(net342()), np.nan), ValueError,
     r"lr: expected a finite number"),
    ("lr-str", lambda: net342().step(direction(net342()), "0.1"), TypeError, r"lr: expected a real number"),
    ("lr-bool", lambda: net342().step(direction(net342()), True), TypeError, r"lr: expected a real number"),
    ("lr-overflows-float32", lambda: net342(dtype=np.float32).step(direction(net342()), 1e300), ValueError,
     r"lr: expected a value representable in float32"),
    ("lr-update-overflows", lambda: net342().step(direction(net342(), W2=np.full((4, 2), 1e300)), 1e300),
     ValueError, r"lr: theta - lr \* D would make W2 overflow"),
    ("D-not-dict", lambda: net342().step([1, 2], 0.1), TypeError, r"D: expected a dict like params"),
    ("D-unknown-key", lambda: net342().step(direction(net342(), W3=np.ones(2)), 0.1), ValueError,
     r"D: unknown keys \['W3'\]"),
    ("D-missing-key", lambda: net342().step({"W1": np.ones((3, 4))}, 0.1), ValueError,
     r"D: missing keys \['b1', 'W2', 'b2'\]"),
    ("D-shape", lambda: net342().step(direction(net342(), W1=np.ones((4, 3))), 0.1), ValueError,
     r"D\['W1'\]: expected shape \(3, 4\), got shape \(4, 3\)"),
    ("D-nan", lambda: net342().step(direction(net342(), b1=np.full(4, np.nan)), 0.1), ValueError,
     r"D\['b1'\]: expected finite values"),
    # losses
    ("mse-out-1d", lambda: losses.mse(np.ones(4), np.ones(4)), ValueError,
     r"out: expected a 2-D array of shape \(n, K\).*out\.reshape\(-1, 1\)"),
    ("mse-y-shape", lambda: losses.mse(np.ones((4, 2)), np.ones((2, 4))), ValueError,
     r"y: expected the shape of out \(4, 2\), got shape \(2, 4\)"),
    ("mse-y-nan", lambda: losses.mse(np.ones((1, 2)), [[np.nan, 0]]), ValueError, r"y: expected finite"),
    ("mse-out-str", lambda: losses.mse("out", np.ones((1, 2))), TypeError, r"out: expected a numeric array"),
    ("masked-mask-values", lambda: losses.masked_mse(np.ones((2, 2)), np.ones((2, 2)), [0.5, 1]), ValueError,
     r"mask: expected only 0s and 1s"),
    ("masked-mask-shape", lambda: losses.masked_mse(np.ones((2, 2)), np.ones((2, 2)), [1, 0, 1]), ValueError,
     r"mask: expected shape \(2, 2\) or \(2,\)"),
    ("masked-mask-nan", lambda: losses.masked_mse(np.ones((2, 2)), np.ones((2, 2)), [np.nan, 1]), ValueError,
     r"mask: expected finite"),
    # data
    ("seed_data-n-zero", lambda: data.seed_data(n=0), ValueError, r"n: expected a whole number >= 1"),
    ("seed_data-n-float", lambda: data.seed_data(n=2.5), TypeError, r"n: expected a whole number"),
    ("seed_data-noise", lambda: data.seed_data(noise=-0.01), ValueError, r"noise: expected a number >= 0"),
    ("seed_data-seed", lambda: data.seed_data(seed=-3), ValueError, r"seed: expected a whole number >= 0"),
    ("probe-n-bool", lambda: data.probe_inputs(n=True), TypeError, r"n: expected a whole number"),
    ("probe-seed-str", lambda: data.probe_inputs(seed="1"), TypeError, r"seed: expected a whole number"),
    # gradcheck.check
    ("check-float32", lambda: gradcheck.check(net342(dtype=np.float32), X5, [0, 1]), ValueError,
     r"net: gradient checking needs a float64 network"),
    ("check-X", lambda: gradcheck.check(net342(), X5[:, :2], [0, 1]), ValueError,
     r"X: expected 3 input columns"),
    ("check-G", lambda: gradcheck.check(net342(), X5, [[0, 1]]), ValueError, r"G: expected shape \(5, 2\)"),
    ("check-h", lambda: gradcheck.check(net342(), X5, [0, 1], h=0), ValueError, r"h: expected a number > 0"),
    ("check-tol", lambda: gradcheck.check(net342(), X5, [0, 1], tol=np.inf), ValueError,
     r"tol: expected a finite"),
    # fixes and optim
    ("naive X 1-D", lambda: fixes.naive(NET, X[0], G), ValueError, r"X:"),
    ("naive X width", lambda: fixes.naive(NET, X[:, :2], G), ValueError, r"X:"),
    ("naive X NaN", lambda: fixes.naive(NET, np.where(X > 0.9, np.nan, X), G), ValueError, r"X:"),
    ("naive X strings", lambda: fixes.naive(NET, [["a", "b", "c"]], G), TypeError, r"X:"),
    ("naive G shape", lambda: fixes.naive(NET, X, [0.0, -1.0, 2.0]), ValueError, r"G:"),
    ("naive G rows", lambda: fixes.naive(NET, X, np.zeros((3, 2))), ValueError, r"G:"),
    ("naive G inf", lambda: fixes.naive(NET, X, [0.0, np.inf]), ValueError, r"G:"),
    ("masked mask shape", lambda: fixes.masked(NET, X, G, [1, 0, 1]), ValueError, r"mask:"),
    ("masked mask values", lambda: fixes.masked(NET, X, G, [0.5, 1]), ValueError, r"mask:"),
    ("freeze unknown name", lambda: fixes.freeze(NET, X, G, trainable=["W3"]), ValueError, r"trainable:"),
    ("freeze not a list", lambda: fixes.freeze(NET, X, G, trainable=3), TypeError, r"trainable:"),
    ("freeze nested list", lambda: fixes.freeze(NET, X, G, trainable=[["W2"]]), TypeError,
     r"trainable: expected parameter names \(strings\)"),
    ("project keep empty", lambda: fixes.project(NET, X, G, keep=[]), ValueError, r"keep:"),
    ("project keep range", lambda: fixes.project(NET, X, G, keep=[2]), ValueError, r"keep:"),
    ("project keep negative", lambda: fixes.project(NET, X, G, keep=[-1]), ValueError, r"keep:"),
    ("project keep repeated", lambda: fixes.project(NET, X, G, keep=[0, 0]), ValueError, r"keep:"),
    ("project keep float", lambda: fixes.project(NET, X, G, keep=[0.0]), TypeError, r"keep:"),
    ("project keep_X width", lambda: fixes.project(NET, X, G, keep_X=np.zeros((4, 2))), ValueError, r"keep_X:"),
    ("project rcond", lambda: fixes.project(NET, X, G, rcond=-1.0), ValueError, r"rcond:"),
    ("project refine", lambda: fixes.project(NET, X, G, refine=-1), ValueError, r"refine:"),
    ("penalty lam", lambda: fixes.penalty(NET, X, G, lam=-1.0), ValueError, r"lam:"),
    ("penalty lam past float32", lambda: fixes.penalty(
        mr.MLP([3, 4, 2], dtype=np.float32), X, G, lam=1e39), ValueError,
     r"lam: expected a number <= 3.4e\+38, which fits in float32, got 1e\+39"),
    ("penalty ref too far", lambda: fixes.penalty(_far_out(), X, G, ref=np.full(8, 3e38), lam=0.0),
     ValueError, r"ref: expected values for which their distance to the outputs stays finite in float32, got max"),
    ("penalty lam times the residual overflows", lambda: fixes.penalty(
        mr.MLP([3, 4, 2], dtype=np.float32), X, G, ref=np.full(8, 100.0), lam=1e37), ValueError,
     r"lam: expected a weight for which G \+ lam \* \(O_keep - ref\) stays finite in float32"),
    ("tangent kernel j", lambda: mr.jacobian.tangent_kernel_by_layer(NET, X, 0, 2), ValueError,
     r"j: output index 2 out of range"),
    ("tangent kernel i", lambda: mr.jacobian.tangent_kernel_by_layer(NET, X, True, 1), TypeError, r"i: "),
    ("apply to a non-model", lambda: optim.SGD(0.1).apply("net", fixes.naive(NET, X, G)), TypeError,
     r"net: expected a model of mlp_ref"),
    ("penalty ref shape", lambda: fixes.penalty(NET, X, G, ref=np.zeros(3)), ValueError, r"ref:"),
    ("penalty ref NaN", lambda: fixes.penalty(NET, X, G, ref=np.full(8, np.nan)), ValueError, r"ref:"),
    ("span keep", lambda: fixes.span_project(NET, X, G, keep=[5]), ValueError, r"keep:"),
    ("nullspace D key", lambda: fixes.nullspace(NET, {"W1": np.zeros((3, 4))}, X), ValueError, r"D:"),
    ("nullspace D shape", lambda: fixes.nullspace(
    NET, {k: np.zeros(3) for k in NET.params}, X), ValueError, r"D\["),
    ("restore tol", lambda: fixes.restore(NET.copy(), X, REF, tol=0.0), ValueError, r"tol:"),
    ("restore max_iter", lambda: fixes.restore(NET.copy(), X, REF, max_iter=0), ValueError, r"max_iter:"),
    ("restore max_iter float", lambda: fixes.restore(NET.copy(), X, REF, max_iter=2.5), TypeError, r"max_iter:"),
    ("restore ref shape", lambda: fixes.restore(NET.copy(), X, REF[:3]), ValueError, r"ref:"),
    ("restore keep_X", lambda: fixes.restore(NET.copy(), X[:, :1], REF), ValueError, r"keep_X:"),
    ("adam lr", lambda: optim.Adam(0.0), ValueError, r"lr:"),
    ("adam order", lambda: optim.Adam(0.1, order="sideways"), ValueError, r"order:"),
    ("momentum beta", lambda: optim.Momentum(0.1, beta=1.0), ValueError, r"beta:"),
    # results that overflow: the argument whose size is to blame, never a NaN or "no limit"
    ("penalty_limit blames the weights, not an ordinary X", lambda: fixes.penalty_limit(_huge_hidden(), X),
     ValueError, r"net: the Gram J J\^T overflows float64: the inputs of layer 2, a1, reach .* with max \|X\| = 0.9"),
    ("project blames the weights, not an ordinary X", lambda: fixes.project(_huge_hidden(), X, G), ValueError,
     r"net: the Gram J J\^T overflows float64"),
    ("fast.project blames the weights, not an ordinary X", lambda: mr.fast.project(_huge_hidden(), X, G), ValueError,
     r"net: the Gram J J\^T overflows float64"),
    ("tangent kernel blames the weights, not an ordinary X", lambda: mr.jacobian.tangent_kernel_by_layer(
        _huge_hidden(), X), ValueError, r"net: the Gram J J\^T overflows float64: the inputs of layer 2, a1, reach .* "
                     r"with max \|X\| = 0.9"),
    ("penalty_limit X overflows the Gram", lambda: fixes.penalty_limit(
        mr.MLP([3, 4, 2], hidden="relu"), np.full((2, 3), 1e160)), ValueError,
     r"X: expected values for which the Gram J J\^T \(which holds X @ X.T\) stays finite"),
    ("project_dense G", lambda: fixes.project_dense(NET, X, [1e307, 1e307]), ValueError,
     r"G: expected values for which the projected direction stays finite in float64"),
    ("nullspace D overflows", lambda: fixes.nullspace(NET, {k: np.full_like(v, 1e308) for k, v in NET.params.items()},
                                                      X, refine=0), ValueError,
     r"D: expected values for which D - J\^T \(J J\^T\)\^\+ J D stays finite in float64, got max \|D\| = 1e\+308"),
    ("fast.nullspace D overflows", lambda: mr.fast.nullspace(
        NET, {k: np.full_like(v, 1e308) for k, v in NET.params.items()}, X), ValueError,
     r"D: expected values for which D - J\^T"),
    ("penalty ref's pull overflows the backward pass", lambda: fixes.penalty(
        NET, X, G, ref=np.full(8, 1e308), lam=1.0), ValueError,
     r"ref: expected values for which the pull lam \* \(O_keep - ref\) keeps the backward pass finite"),
    ("penalty lam's pull overflows the backward pass", lambda: fixes.penalty(
        NET, X, G, ref=REF + 1.0, lam=1e308), ValueError, r"lam: expected values for which the pull"),
    ("act(0)", lambda: NET.act(0), ValueError, r"l: expected a layer number 1 \.\. 2, got 0"),
    ("act(3)", lambda: NET.act(3), ValueError, r"l: expected a layer number 1 \.\. 2, got 3"),
    ("act('a')", lambda: NET.act("a"), TypeError, r"l: expected a layer number"),
    ("adam eps is 0 in float32", lambda: optim.Adam(0.1, eps=1e-50).update({"W": np.zeros(3, np.float32)}),
     ValueError, r"eps: expected a value representable in float32"),
    ("sgd lr is inf in float32", lambda: optim.SGD(1e300).update({"W": np.ones(3, np.float32)}),
     ValueError, r"lr: expected a value representable in float32"),
    ("project refine 10**9", lambda: fixes.project(NET, X, G, refine=10**9), ValueError,
     r"refine: expected at most 100 passes"),
    ("fast.project refine 10**9", lambda: mr.fast.project(NET, X, G, refine=10**9), ValueError,
     r"refine: expected at most 100 passes"),
    ("digits test_fraction leaving no training image", lambda: data.digits(test_fraction=0.9999), ValueError,
     r"test_fraction: expected a fraction that leaves images of every digit in both sets, got 0.9999"),
    ("forward_from overflows", lambda: mr.MLP([3, 4, 2], hidden="identity", init_std=10).forward_from(
        1, np.full((2, 3), 1e307)), ValueError, r"a_prev: expected values for which the output of layers 1 \.\. 2"),
    ("forward_from's weights overflow", lambda: _huge_W2().forward_from(2, np.ones((2, 4))), ValueError,
     r"net: the output of layers 2 \.\. 2 overflowed float64 .*the parameters are too large"),
    ("forward_from reads no NaN it does not use", lambda: _nan_W1_identity().forward_from(
        2, np.full((2, 4), 1e307)), ValueError, r"a_prev: expected values"),
    ("forward_from names a NaN it reads", lambda: _nan_W1_identity().forward_from(1, np.ones((2, 3))), ValueError,
     r"^net: forward_from's output is not finite because parameter W1 \(1 NaN\) holds NaN/inf\. Rebuild or reload"),
    ("adam eps is inf in float32", lambda: optim.Adam(0.1, eps=1e300).update({"W": np.ones(3, np.float32)}),
     ValueError, r"eps: expected a value representable in float32"),
    ("tangent kernel of None", lambda: mr.jacobian.tangent_kernel_by_layer(None, X), TypeError,
     r"net: expected an MLP, got NoneType"),
    ("tangent kernel X overflows", lambda: mr.jacobian.tangent_kernel_by_layer(
        mr.MLP([3, 4, 2], hidden="relu"), np.full((2, 3), 1e200)), ValueError,
     r"X: expected values for which the kernel \(which holds X @ X.T\) stays finite"),
    ("TwoTower.backward of a record with its output cut", lambda: _towers_record_cut("output"), ValueError,
     r"record: expected this model's forward record, .output \(n, 2\) and every tower on its n rows"),
    ("TwoTower.backward of a record with a tower's rows cut", lambda: _towers_record_cut("tower"), ValueError,
     r"record: expected this model's forward record"),
    ("backward of a record made inf by hand", lambda: NET.backward(torn_inf(), G), ValueError,
     r"record: stage a1 holds NaN/inf \(1 inf\), which no record of net.forward\(X\) does"),
    # a huge list is quoted short (reprlib), not whole
    ("keep huge", lambda: fixes.project(NET, X, G, keep=[0] * 100_000), ValueError,
     r"keep: expected distinct output indices, got \[0, 0, 0, 0, 0, 0, \.\.\.\]$"),
    ("trainable huge", lambda: fixes.freeze(NET, X, G, trainable=["W9"] * 100_000), ValueError,
     r"trainable: unknown parameter names \['W9', 'W9', 'W9', 'W9', 'W9', 'W9', \.\.\.\]; .{,200}$"),
    ("hidden huge", lambda: mr.MLP([3, 4, 4, 2], hidden=["tanh"] * 100_000), ValueError,
     r"hidden: expected one activation name per hidden layer .{,120}\.\.\.\]$"),
    ("heads huge", lambda: mr.SplitHeads([3, 4, 100_000], heads=[[0]]), ValueError,
     r"heads: output\(s\) \[1, 2, 3, 4, 5, 6, \.\.\.\] are in no group"),
    # a mistyped keyword is named, and refused in the model's own name, not MLP.__init__'s
    ("SplitHeads hiden=", lambda: mr.SplitHeads([3, 4, 2], hiden="tanh"), TypeError,
     r"^hiden: not a keyword argument of SplitHeads \(did you mean 'hidden'\?\); expected "
     r"'heads' or an MLP's: hidden, output, init_std, seed, dtype$"),
    ("TwoTower group=", lambda: mr.TwoTower([3, 4, 2], group=[[0], [1]]), TypeError,
     r"^group: not a keyword argument of TwoTower \(did you mean 'groups'\?\)"),
    # save / load
    ("save-path", lambda: net342().save(3), TypeError, r"path: expected a file path"),
    ("load-path", lambda: mr.MLP.load(None), TypeError, r"path: expected a file path"),
    ("save None", lambda: saving.save(None, "x.npz"), TypeError, r"net: expected an MLP .* got NoneType None"),
    ("save SplitHeads", lambda: saving.save(mr.SplitHeads([3, 4, 2]), "x.npz"), TypeError,
     r"net: expected an MLP \(SplitHeads: save net.to_mlp\(\)\), got SplitHeads"),
    ("save-path NUL", lambda: net342().save("a\0b.npz"), ValueError, r"path: expected a file path without a NUL"),
    ("load-path NUL", lambda: mr.MLP.load("a\0b.npz"), ValueError, r"path: expected a file path without a NUL"),
    # the field's baselines (mlp_ref.baselines, also fixes.agem, ...)
    ("agem net", lambda: fixes.agem("net", X, G, X, G), TypeError, r"net: expected a model"),
    ("agem keep_X width", lambda: fixes.agem(NET, X, G, X[:, :2], G), ValueError, r"keep_X: expected 3 input columns"),
    ("agem keep_G shape", lambda: fixes.agem(NET, X, G, X, np.ones((3, 2))), ValueError, r"keep_G: expected shape"),
    ("agem keep_G nan", lambda: fixes.agem(NET, X, G, X, [np.nan, 1.0]), ValueError, r"keep_G: expected finite"),
    ("ewc fisher negative", lambda: fixes.ewc(NET, X, G, direction(NET, W1=-np.ones((3, 4))), NET.params, 1.0),
     ValueError, r"fisher: expected a diagonal Fisher, every entry >= 0"),
    ("ewc fisher keys", lambda: fixes.ewc(NET, X, G, {"W1": np.ones((3, 4))}, NET.params, 1.0), ValueError,
     r"fisher: missing keys"),
    ("ewc anchor type", lambda: fixes.ewc(NET, X, G, direction(NET), [1.0], 1.0), TypeError,
     r"anchor: expected a dict like params"),
    ("ewc lam negative", lambda: fixes.ewc(NET, X, G, direction(NET), NET.params, -1.0), ValueError,
     r"lam: expected a number >= 0"),
    ("ewc lam overflows", lambda: fixes.ewc(NET, X, G, direction(NET), direction(NET, W1=np.full((3, 4), -1e300)),
                                            1e300), ValueError, r"lam: expected a weight for which"),
    ("fisher_diagonal keep_X", lambda: fixes.fisher_diagonal(NET, "x", G), TypeError, r"keep_X: expected a numeric"),
    ("fisher_diagonal net", lambda: fixes.fisher_diagonal(None, X, G), TypeError, r"net: expected a model"),
    ("gpm_bases threshold 0", lambda: fixes.gpm_bases(NET, X, threshold=0.0), ValueError,
     r"threshold: expected a number > 0"),
    ("gpm_bases threshold above 1", lambda: fixes.gpm_bases(NET, X, threshold=1.5), ValueError,
     r"threshold: expected an energy fraction in \(0, 1\]"),
    ("gpm_bases cut 1", lambda: fixes.gpm_bases(NET, X, cut=1.0), ValueError, r"cut: expected a fraction"),
    ("gpm_bases both", lambda: fixes.gpm_bases(NET, X, threshold=0.9, cut=0.1), ValueError,
     r"cut: expected either threshold or cut"),
    ("gpm_bases no batches", lambda: fixes.gpm_bases(NET, iter([])), ValueError,
     r"keep_X: expected at least one batch"),
    ("gpm_bases bad batch", lambda: fixes.gpm_bases(NET, [X, X[:, :2]]), ValueError,
     r"keep_X: expected 3 input columns"),
    ("gpm_bases keep_X int", lambda: fixes.gpm_bases(NET, 3), TypeError, r"keep_X: expected an array"),
    ("gpm_bases previous", lambda: fixes.gpm_bases(NET, X, previous=[1]), TypeError,
     r"previous: expected the Bases of gpm_bases"),
    ("gpm_bases previous of another net", lambda: fixes.gpm_bases(NET, X, previous=fixes.gpm_bases(
        mr.MLP([3, 5, 2]), X)), ValueError, r"previous: expected bases of layer inputs"),
    ("gpm bases None", lambda: fixes.gpm(NET, X, G, None), TypeError, r"bases: expected the Bases"),
    ("gpm bases of two towers", lambda: fixes.gpm(NET, X, G, fixes.gpm_bases(mr.TwoTower([3, 4, 2]), X)),
     ValueError, r"bases: expected bases of layer inputs"),
    ("gpm net", lambda: fixes.gpm(object(), X, G, None), TypeError, r"net: expected a model"),
    # bases that would break GPM's promise: twice a basis moved the memory's outputs by 36 at lr 1,
    # NaN made a NaN step, float32 bases in a float64 network held the memory to 1.7e-6 only
    ("gpm bases doubled", lambda: fixes.gpm(NET, X, G, _bases(lambda U: 2 * U)), ValueError,
     r"bases: expected orthonormal bases"),
    ("gpm bases nan", lambda: fixes.gpm(NET, X, G, _bases(lambda U: U * np.nan)), ValueError,
     r"bases: expected finite bases"),
    ("gpm bases float32", lambda: fixes.gpm(NET, X, G, _bases(lambda U: U.astype(np.float32))), TypeError,
     r"bases: expected every basis a 2-d array of the network's dtype float64"),
    ("gpm_bases previous doubled", lambda: fixes.gpm_bases(NET, X, previous=_bases(lambda U: 2 * U)), ValueError,
     r"previous: expected orthonormal bases"),
    ("gpm bases claimed gpm_bases's", lambda: fixes.gpm(NET, X, G, fixes.Bases(
        _bases(lambda U: 2 * U).bases, made_by_gpm_bases=True)), ValueError, r"bases: expected orthonormal bases"),
    # ewc_merge: it used anchor 0 for both of [F, F], took a negative Fisher, and [] was an IndexError
    ("ewc_merge one anchor for two", lambda: fixes.ewc_merge([direction(NET)] * 2, [NET.params]), ValueError,
     r"anchors: expected one anchor per Fisher \(2\), got 1"),
    ("ewc_merge empty", lambda: fixes.ewc_merge([], []), ValueError, r"fishers: expected at least one Fisher"),
    ("ewc_merge negative", lambda: fixes.ewc_merge([direction(NET, W1=-np.ones((3, 4)))], [NET.params]),
     ValueError, r"fishers\[0\]: expected a diagonal Fisher, every entry >= 0"),
    ("ewc_merge nan fisher", lambda: fixes.ewc_merge([direction(NET), direction(NET, b1=np.full(4, np.nan))],
                                                     [NET.params] * 2),
     ValueError, r"fishers\[1\]\['b1'\]: expected finite"),
    ("ewc_merge inf anchor", lambda: fixes.ewc_merge([direction(NET)], [direction(NET, W2=np.full((4, 2), np.inf))]),
     ValueError, r"anchors\[0\]\['W2'\]: expected finite"),
    ("ewc_merge shapes differ", lambda: fixes.ewc_merge([direction(NET), direction(mr.MLP([3, 5, 2]))],
                                                        [NET.params] * 2),
     ValueError, r"fishers\[1\]\['W1'\]: expected shape"),
    ("ewc_merge anchor keys", lambda: fixes.ewc_merge([direction(NET)], [{"W1": np.ones((3, 4))}]), ValueError,
     r"anchors\[0\]: missing keys"),
    ("ewc_merge not a list", lambda: fixes.ewc_merge(direction(NET), [NET.params]), TypeError,
     r"fishers: expected a list of diagonal Fishers"),
]


def _bases(change):
    """GPM's bases of NET on X at threshold 1.0, each basis changed by ``change``."""
    bases = fixes.gpm_bases(NET, X, threshold=1.0)
    return type(bases)([[change(U) for U in piece] for piece in bases.bases])


def blamed(pattern):
    """The names a row's pattern starts with: ``D\\['W2'\\]: ...`` blames D, ``(G|lr): ...`` G
    or lr, ``out and y: ...`` out (the first named)."""
    head = pattern.lstrip("^(")
    names = [re.match(r"[A-Za-z_][\w.]*", alternative).group(0) for alternative in head.split("|")
             if re.match(r"[A-Za-z_]", alternative)]
    return set(names) if head != pattern.lstrip("^") else set(names[:1])


def assert_names_the_argument(error, pattern):
    """Behaviour: the blamed argument is ``error.argument`` and the first word of its message."""
    argument = getattr(error, "argument", None)
    assert argument in blamed(pattern), (type(error).__name__, argument, str(error))
    assert str(error).startswith(argument), str(error)


#: the rows whose wording is asserted too: a sample that documents the style of the messages
WORDING = {"sizes-float", "init_std-negative", "X-1d-one-sample", "X-nan", "X-too-big-for-float32",
           "G-transposed", "lr-overflows-float32", "D-shape", "project keep range", "restore ref shape",
           "penalty ref too far", "backward of a record made inf by hand", "save-path NUL"}


@pytest.mark.parametrize("call, exc, pattern", [c[1:] for c in BAD_INPUTS],
                         ids=[c[0] for c in BAD_INPUTS])
def test_bad_input_names_the_argument(call, exc, pattern):
    with pytest.raises(exc) as refused:
        call()
    assert_names_the_argument(refused.value, pattern)


@pytest.mark.parametrize("call, exc, pattern", [c[1:] for c in BAD_INPUTS if c[0] in WORDING],
                         ids=[c[0] for c in BAD_INPUTS if c[0] in WORDING])
def test_a_sample_of_the_messages_says_what_was_expected_and_what_came(call, exc, pattern):
    with pytest.raises(exc, match="^" + pattern):
        call()


def test_a_step_on_a_network_that_already_holds_nan_blames_the_network_in_both_tiers():
    net = NET.copy()
    net.params["b2"][0] = np.nan
    before = param_bytes(net)
    zero = {k: np.zeros_like(v) for k, v in net.params.items()}
    for step in (net.step, lambda D, lr: mr.fast.step(net, D, lr)):
        with pytest.raises(ValueError, match=r"^net: parameter b2 \(1 NaN\) already holds NaN/inf"):
            step(zero, 0.1)
        assert param_bytes(net) == before


def test_an_optimizer_applies_a_direction_in_the_networks_dtype():
    """``SGD(lr).apply(net, D)`` leaves exactly the bits of ``net.step(D, lr)``, whatever D's dtype."""
    rng = np.random.default_rng(0)
    for net_dtype, d_dtype in ((np.float32, np.float64), (np.float64, np.float32)):
        net = mr.MLP([3, 4, 2], dtype=net_dtype)
        D = {k: rng.normal(size=v.shape).astype(d_dtype) for k, v in net.params.items()}
        a, b = net.copy().step(D, 0.1), net.copy()
        optim.SGD(0.1).apply(b, D)
        assert param_bytes(a) == param_bytes(b)


def test_good_unusual_inputs_are_accepted():
    # a 0-d array as keep, as 0 itself
    by_array, by_int = fixes.project(NET, X, G, keep=np.array(0)), fixes.project(NET, X, G, keep=0)
    assert all(np.array_equal(by_array[k], by_int[k]) for k in by_int)
    # NumPy ints for sizes and seed, tuples, integer and bool arrays as X, one-row batches
    net = mr.MLP((np.int64(3), np.int32(4), 2), seed=np.uint8(3))
    assert net.sizes == [3, 4, 2] and type(net.sizes[0]) is int
    assert net.forward(np.arange(3).reshape(1, 3)).output.shape == (1, 2)
    assert net.forward(np.ones((2, 3), dtype=bool)).output.dtype == np.float64
    assert net(np.ones((1, 3), dtype=np.float32)).dtype == np.float64
    assert losses.masked_mse(np.ones((2, 2)), np.ones((2, 2)), np.array([True, False]))[0] >= 0


def test_a_rejected_restore_changes_nothing():
    net = NET.copy()
    with pytest.raises(ValueError):
        fixes.restore(net, X, REF[:3])
    assert all(np.array_equal(net.params[k], NET.params[k]) for k in net.params)


# -- the second pass (issue 14): each call gets a network and an optimizer that has taken a step;
#    after the refusal, every parameter and every moment must hold the same bits
def _masked(a):
    return np.ma.masked_array(np.asarray(a, dtype=float), mask=np.zeros(np.shape(a), dtype=bool))


def _read_only(net):
    net.params["b2"].flags.writeable = False     # as np.load(..., mmap_mode="r") hands it out
    return net


BIG_G = np.array([0.0, -1.7e308])
RELU = mr.MLP([3, 4, 4, 2], hidden="relu", seed=0)     # its output can be pushed past float64
STATEFUL_BAD_INPUTS = [
    # numpy masked arrays: the mask would be dropped, the data under it used
    ("masked X forward", lambda net, opt: net.forward(_masked(X)), TypeError, r"X: expected a plain array"),
    ("masked G backward", lambda net, opt: net.backward(net.forward(X), _masked(G)), TypeError, r"G: "),
    ("masked X naive", lambda net, opt: fixes.naive(net, _masked(X), G), TypeError, r"X: "),
    ("masked keep_X project", lambda net, opt: fixes.project(net, X, G, keep_X=_masked(X)), TypeError,
     r"keep_X: expected a plain array"),
    ("masked ref restore", lambda net, opt: fixes.restore(net, X, _masked(REF)), TypeError, r"ref: "),
    ("masked out mse", lambda net, opt: losses.mse(_masked(np.ones((2, 2))), np.ones((2, 2))), TypeError,
     r"out: "),
    ("masked D step", lambda net, opt: net.step(direction(net, W1=_masked(np.ones((3, 4)))), 0.1),
     TypeError, r"D\['W1'\]: expected a plain array"),
    ("masked D adam", lambda net, opt: opt.apply(net, direction(net, b1=_masked(np.ones(4)))), TypeError,
     r"D\['b1'\]: "),
    # non-numeric dtypes
    ("X timedelta64", lambda net, opt: net.forward(np.ones((2, 3), dtype="m8[s]")), TypeError,
     r"X: expected a numeric array \(bool, int or float\), got .*timedelta64"),
    ("X datetime64", lambda net, opt: net.forward(np.ones((2, 3), dtype="M8[D]")), TypeError, r"X: "),
    ("X bytes", lambda net, opt: net.forward(np.array([[b"1", b"2", b"3"]])), TypeError, r"X: "),
    ("G timedelta64", lambda net, opt: fixes.naive(net, X, np.array([0, 1], dtype="m8[s]")), TypeError,
     r"G: "),
    # silent inf / NaN: refused, naming the argument that is too large
    ("G huge naive", lambda net, opt: fixes.naive(net, X, BIG_G), ValueError,
     r"G: expected values for which the backward pass stays finite"),
    ("G huge project", lambda net, opt: fixes.project(net, X, BIG_G), ValueError, r"G: "),
    ("G huge span", lambda net, opt: fixes.span_project(net, X, BIG_G), ValueError, r"G: "),
    ("G huge freeze", lambda net, opt: fixes.freeze(net, X, BIG_G, trainable=["W2", "b2"]), ValueError,
     r"G: "),
    ("G huge masked", lambda net, opt: fixes.masked(net, X, BIG_G, [0, 1]), ValueError, r"G: "),
    ("mse y huge", lambda net, opt: losses.mse(np.ones((2, 2)), np.full((2, 2), 1.7e308)), ValueError,
     r"y: expected values for which the squared error stays finite"),
    ("mse out huge", lambda net, opt: losses.mse(np.full((2, 2), 1e200), np.zeros((2, 2))), ValueError,
     r"^out: expected values .* finite in float64 \(\|out\| below about 3\.35e\+153 here\), "
     r"got \|out\| up to 1e\+200$"),
    ("mse a tie blames both", lambda net, opt: losses.mse(np.full((2, 2), 1e200), np.full((2, 2), -1e200)),
     ValueError, r"^out and y: expected values .* \(\|out\| and \|y\| below about .*\), got \|out\| and "
     r"\|y\| up to 1e\+200$"),
    ("adam D 1e200", lambda net, opt: opt.update(direction(net, W1=np.full((3, 4), 1e200))), ValueError,
     r"D: expected values small enough for Adam's arithmetic .* v\['W1'\] overflow"),
    ("adam apply D 1e200", lambda net, opt: opt.apply(net, direction(net, W2=np.full((4, 2), 1e200))),
     ValueError, r"D: "),
    # messages that blame the real cause
    ("forward X 1e308", lambda net, opt: mr.MLP([3, 4, 2], hidden="identity", init_std=2.0).forward(
        np.full((2, 3), 1e308)),
     ValueError, r"X: expected values for which z1 = X @ W1 \+ b1 stays finite"),
    ("project X 1e160", lambda net, opt: fixes.project(net, np.full((8, 3), 1e160), G), ValueError,
     r"keep_X \(X when not given\): expected values for which the Gram"),
    ("restore ref 1e306", lambda net, opt: fixes.restore(net, X, np.full(8, 1e306)), ValueError,
     r"ref: expected values the network can reach"),
    # a step that fits, and an output that then overflows: the ref asked for it (both tiers)
    ("restore ref 1e200 relu", lambda net, opt: fixes.restore(RELU, X, np.full(8, 1e200)), ValueError,
     r"ref: expected values the network can reach: 1 restoring step\(s\) toward max \|O - ref\| = 1e\+200"),
    ("fast restore ref 1e200 relu", lambda net, opt: mr.fast.restore(RELU, X, np.full(8, 1e200)),
     ValueError, r"ref: expected values the network can reach: 1 restoring step"),
    # atomic: the network refuses the update (a read-only parameter): the moments do not advance
    ("adam apply read-only", lambda net, opt: opt.apply(_read_only(net), direction(net)), ValueError,
     r"net: parameters \['b2'\] are read-only"),
    # the constructor
    ("init_std overflows float32", lambda net, opt: mr.MLP([3, 4, 2], init_std=1e39, dtype=np.float32),
     ValueError, r"init_std: expected a number <= .* fits in float32, got 1e\+39"),
    ("init_std -0.0", lambda net, opt: mr.MLP([3, 4, 2], init_std=-0.0), ValueError,
     r"init_std: expected a number >= 0 .*got -0.0"),
    ("sizes 2**64", lambda net, opt: mr.MLP([2**64, 2]), ValueError,
     r"sizes: \[18446744073709551616, 2\] means .* parameters, .* more than this machine's memory"),
    # gradcheck on an integer array: x + h cannot be stored in it
    ("numerical_gradient int", lambda net, opt: gradcheck.numerical_gradient(lambda: 0.0, np.array([1, 2, 3])),
     TypeError, r"x: expected a float array .* got dtype int64"),
    ("numerical_gradient list", lambda net, opt: gradcheck.numerical_gradient(lambda: 0.0, [1.0]),
     TypeError, r"x: expected a NumPy float array"),
    ("numerical_gradient f not callable", lambda net, opt: gradcheck.numerical_gradient(5, np.ones(2)),
     TypeError, r"f: expected a function of no arguments"),
    ("numerical_gradient f returns None", lambda net, opt: gradcheck.numerical_gradient(lambda: None, np.ones(2)),
     TypeError, r"f: expected a function that returns an array of numbers, got NoneType"),
    ("numerical_gradient f is NaN at x", lambda net, opt: gradcheck.numerical_gradient(
        lambda: np.array([np.nan]), np.ones(2)), ValueError, r"f: expected a function whose values are finite"),
    ("numerical_gradient h overflows", lambda net, opt: (lambda x: gradcheck.numerical_gradient(
        lambda: x ** 2, x, h=1e308))(X5.copy()), ValueError, r"h: expected a step for which f\(x \+- h\) stays finite"),
    # smaller public helpers
    ("matvec D keys", lambda net, opt: mr.jacobian.OutputJacobian(net, X).matvec({"W1": np.ones((3, 4))}),
     ValueError, r"D: missing keys"),
    ("matvec D shape", lambda net, opt: mr.jacobian.OutputJacobian(net, X).matvec(
        direction(net, W2=np.ones((2, 4)))), ValueError, r"D\['W2'\]: expected shape \(4, 2\)"),
    ("GramSolver not square", lambda net, opt: mr.pseudoinverse.GramSolver(np.ones((2, 3))), ValueError,
     r"gram: expected a square"),
    ("GramSolver asymmetric", lambda net, opt: mr.pseudoinverse.GramSolver(np.array([[1.0, 2.0], [0.0, 1.0]])),
     ValueError, r"gram: expected a symmetric matrix"),
    ("GramSolver inf", lambda net, opt: mr.pseudoinverse.GramSolver(np.full((2, 2), np.inf)), ValueError,
     r"gram: expected finite"),
    ("GramSolver rcond str", lambda net, opt: mr.pseudoinverse.GramSolver(np.eye(2), rcond="x"), TypeError, r"rcond: "),
    ("GramSolver rcond negative", lambda net, opt: mr.pseudoinverse.GramSolver(np.eye(2), rcond=-1.0), ValueError,
     r"rcond: "),
    ("GramSolver rhs length", lambda net, opt: mr.pseudoinverse.GramSolver(np.eye(2))(np.ones(3)), ValueError,
     r"rhs: expected shape \(2,\) or \(2, k\), got \(3,\)"),
    ("flatten None", lambda net, opt: mr.jacobian.flatten(None), TypeError, r"D: expected a non-empty dict"),
    ("unflatten short", lambda net, opt: mr.jacobian.unflatten(np.ones(3), net.params), ValueError,
     r"vector: expected shape \(26,\) or \(26, 1\), one entry per parameter"),
    ("forward_from 99", lambda net, opt: net.forward_from(99, X), ValueError, r"layer: expected a layer 1 .. 3"),
    ("forward_from width", lambda net, opt: net.forward_from(2, X), ValueError, r"a_prev: expected 4 columns"),
    ("TwoTower.tower(2)", lambda net, opt: mr.TwoTower([3, 4, 2]).tower(2), ValueError,
     r"k: expected a tower index 0 .. 1, got 2"),
    # restore toward a ref out of reach: its Gauss-Newton step (lr and D finite) does not fit float64
    ("restore ref 1e307", lambda net, opt: fixes.restore(net, X, np.full(len(X), 1e307)), ValueError,
     r"ref: expected values the network can reach, got max \|O - ref\| = 1e\+307, whose Gauss-Newton step "
     r"does not fit the parameters \(lr: "),
]


def test_restore_whose_steps_make_the_output_overflow_blames_ref_and_changes_nothing():
    """A ReLU network's output is linear in its last weights: one step toward ref = 1e300 reaches
    them, and the next forward pass overflows; ref is named (the steps were made from it), and the
    network is as it was."""
    net = mr.MLP([3, 4, 2], hidden="relu", seed=0)
    before = param_bytes(net)
    with pytest.raises(ValueError) as refused:
        fixes.restore(net, X, np.full(len(X), 1e300))
    assert_names_the_argument(refused.value, r"ref: expected values the network can reach: 1 restoring step\(s\) "
                                             r"toward max \|O - ref\| = 1e\+300 made its output overflow \(net: ")
    assert re.match(r"ref: expected values the network can reach: 1 restoring step\(s\) toward max \|O - ref\| = "
                    r"1e\+300 made its output overflow \(net: forward's output is not finite", str(refused.value))
    assert param_bytes(net) == before


def _state_bytes(net, opt):
    moments = {f"{name}[{k}]": a.tobytes() for name in ("m", "v") for k, a in getattr(opt, name).items()}
    return param_bytes(net), moments, opt.t


@pytest.mark.parametrize("call, exc, pattern", [c[1:] for c in STATEFUL_BAD_INPUTS],
                         ids=[c[0] for c in STATEFUL_BAD_INPUTS])
def test_bad_input_names_the_argument_and_changes_nothing(call, exc, pattern):
    net, opt = NET.copy(), optim.Adam(0.01)
    opt.apply(net, fixes.naive(net, X, G))               # moments that a rejected call must keep
    before = _state_bytes(net, opt)
    with pytest.raises(exc) as refused:
        call(net, opt)
    assert_names_the_argument(refused.value, "(" + pattern + ")")
    assert _state_bytes(net, opt) == before


def test_numerical_gradient_puts_x_back_when_f_raises():
    x = np.array([1.0, 2.0])

    def f():
        if x[0] != 1.0:
            raise RuntimeError("f fails off its start")
        return x
    with pytest.raises(RuntimeError):
        gradcheck.numerical_gradient(f, x)
    assert x.tolist() == [1.0, 2.0]


def test_numerical_gradient_of_a_float_copy_is_right_where_an_int_array_is_refused():
    x = np.array([1, 2, 3]).astype(float)               # what the message tells the caller to pass
    assert np.allclose(gradcheck.numerical_gradient(lambda: x * x, x), [2.0, 4.0, 6.0], rtol=1e-9)


def test_a_restore_whose_steps_overflow_the_output_changes_nothing():
    for restore in (fixes.restore, mr.fast.restore):
        net = RELU.copy()
        with pytest.raises(ValueError, match="^ref: "):
            restore(net, X, np.full(8, 1e200))
        assert param_bytes(net) == param_bytes(RELU)
