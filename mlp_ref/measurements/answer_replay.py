"""The accepted answer's TensorFlow script, replayed in NumPy.

The script builds the seed network, then runs three train ops one after another; we run the
same ops on the same setup, and then, from the same start, the op it never ran: the masked
loss with every variable trainable.
"""
from __future__ import annotations

import numpy as np

from .. import fixes
from ..losses import masked_mse, mse
from ..setups import OUT1, seed_setup
from .rules import MASK

#: The script's train ops: (name, loss, var_list), run one after another as it does.
ANSWER_OPS = [
    ("train_op2", "loss2", ["W2", "b2"]),
    ("train_op12", "loss", ["W2", "b2"]),
    ("train_op_all", "loss", None),
]
#: The case the answer never ran: the mask with all variables.
UNRUN_OP = ("mask, all variables", "loss2", None)


def _state(net, X, Y, mask):
    record = net.forward(X)
    return {"hidden": record.a[1], "out": record.output,
            "loss": mse(record.output, Y)[0], "loss2": masked_mse(record.output, Y, mask)[0]}


def _run_op(net, X, Y, mask, op, lr, after, initial_out1):
    """One op in place, run on the state ``after`` (the op before it, or "initial"); the row
    of its state and of out1's change, made by this op and since the initial state."""
    name, loss, var_list = op
    before = net(X)[:, OUT1]
    _, G = mse(net(X), Y) if loss == "loss" else masked_mse(net(X), Y, mask)
    net.step(fixes.freeze(net, X, G, trainable=var_list) if var_list else fixes.naive(net, X, G), lr)
    out1 = net(X)[:, OUT1]
    return {"op": name, "loss_name": loss, "var_list": var_list, "after": after,
            **_state(net, X, Y, mask), "d_out1": out1 - before, "d_out1_start": out1 - initial_out1}


def replay_answer(lr=0.1):
    """The answer's script in NumPy: the seed setup, then its three train ops in order,
    then (from the same start as train_op2) the op it never ran: the mask with all variables.

    Returns a list of rows, one per state: ``op``, ``loss_name``, ``var_list``, ``after``
    (the state the op ran from: the op before it, or "initial"; None for the initial state),
    ``hidden`` (8, 4), ``out`` (8, 2), ``loss``, ``loss2``, and two changes of out1 (8,):
    ``d_out1``, made by this op alone (from the state ``after``), and ``d_out1_start``, since
    the initial state (zeros for the initial state). The two are the same for the first op and
    for the unrun one, which both start from the initial state.
    """
    net, X, Y = seed_setup()
    mask = np.tile(MASK, (X.shape[0], 1))          # the script's mask_out1: [0, 1] per row
    start = net.copy()
    initial_out1 = net(X)[:, OUT1]
    rows = [{"op": "initial", "loss_name": None, "var_list": None, "after": None,
             **_state(net, X, Y, mask), "d_out1": np.zeros(X.shape[0]),
             "d_out1_start": np.zeros(X.shape[0])}]
    for op in ANSWER_OPS:
        rows.append(_run_op(net, X, Y, mask, op, lr, rows[-1]["op"], initial_out1))
    rows.append(_run_op(start, X, Y, mask, UNRUN_OP, lr, "initial", initial_out1))
    return rows
