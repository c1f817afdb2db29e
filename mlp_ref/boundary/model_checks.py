"""The argument checks that know what a model of this package is (``network.Model``).

The rest of the boundary beside ``checks``, which cannot hold these: ``network`` imports
``checks``, and these read ``network``. Every refusal is a ``BadValue`` or ``BadType`` whose
message starts with the argument's name and whose ``argument`` attribute is that name.
"""
from __future__ import annotations

import reprlib

import numpy as np

from ..network import MLP, Model
from . import checks
from .checks import BadType, BadValue, check_inputs, check_keep, check_rcond


def check_net(net):
    """``net`` if it is a model of this package, else TypeError starting 'net:'."""
    if not isinstance(net, Model):
        raise BadType(f"net: expected a model of mlp_ref (MLP, SplitHeads, TwoTower), "
                      f"got {checks.describe(net)}", argument="net")
    return net


def check_mlp(net, hint=""):
    """``net`` if it is an MLP, else TypeError starting 'net:' (``hint``: where other models go)."""
    if not isinstance(net, MLP):
        raise BadType(f"net: expected an MLP{hint}, got {checks.describe(net)}", argument="net")
    return net


def check_XG(net, X, G):
    """(X, G) checked: X (n, d) and G (n, K) or (K,)."""
    X = check_inputs(check_net(net), X)
    G = checks.rows_or_vector("G", G, net.dtype, X.shape[0], net.sizes[-1])
    return X, G


def check_rule(net, X, G, keep_X):
    """(X, G, keep_X) of a rule that holds outputs on keep_X: keep_X (n', d), X when not given."""
    X, G = check_XG(net, X, G)
    return X, G, (X if keep_X is None else check_inputs(net, keep_X, "keep_X"))


def check_nullspace(net, D, keep_X, rcond, refine):
    """(D, keep_X, rcond, refine) of ``fixes.nullspace``: D a finite dict like net.params."""
    D = checks.param_dict("D", D, check_net(net).param_shapes, net.dtype)
    return D, check_inputs(net, keep_X, "keep_X"), check_rcond(rcond), check_refine(refine)


def check_penalty(net, X, G, keep, lam):
    """(X, G, keep, lam) of ``fixes.penalty``: lam >= 0, representable in the network's dtype."""
    X, G = check_XG(net, X, G)
    return X, G, check_keep(keep, net.sizes[-1]), checks.check_weight("lam", lam, net.dtype)


#: Each refinement pass multiplies the error by about eps * cond(J J^T): a few reach roundoff
#: wherever refining converges at all, so more than this is a mistake (it would only take time).
MAX_REFINE = 100


def check_refine(refine):
    """A whole number of refinement passes, 0 .. MAX_REFINE (None: the default, 1)."""
    refine = 1 if refine is None else checks.whole_number("refine", refine, minimum=0)
    if refine > MAX_REFINE:
        raise BadValue(f"refine: expected at most {MAX_REFINE} passes (each multiplies the error "
                       f"by about eps * cond(J J^T): a few reach roundoff), got {refine}", argument="refine")
    return refine


def check_trainable(net, trainable):
    """A list of parameter names of ``net``."""
    if isinstance(trainable, str):
        trainable = [trainable]
    if not hasattr(trainable, "__iter__"):
        raise BadType(f"trainable: expected a list of parameter names from {list(net.params)}, "
                      f"got {checks.describe(trainable)}", argument="trainable")
    trainable = list(trainable)
    if not all(isinstance(k, str) for k in trainable):
        raise BadType(f"trainable: expected parameter names (strings) from {list(net.params)}, "
                      f"got {reprlib.repr(trainable)}", argument="trainable")
    unknown = [k for k in trainable if k not in net.params]
    if unknown:
        raise BadValue(f"trainable: unknown parameter names {reprlib.repr(unknown)}; "
                       f"known: {list(net.params)}", argument="trainable")
    return trainable


def check_ref(ref, n, keep, dtype):
    """ref as (n, q): accepts (n,) when a single output is kept."""
    ref = checks.as_array("ref", ref, dtype)
    if ref.shape == (n,) and len(keep) == 1:
        ref = ref[:, None]
    if ref.shape != (n, len(keep)):
        hint = f" or ({n},)" if len(keep) == 1 else ""
        raise BadValue(f"ref: expected shape ({n}, {len(keep)}){hint} (rows of keep_X, "
                       f"kept outputs), got shape {ref.shape}", argument="ref")
    return ref


def check_restore(net, keep_X, ref, keep, tol, max_iter, rcond):
    """The arguments of ``fixes.restore``, checked (``fast.restore`` takes the same)."""
    keep_X = check_inputs(check_net(net), keep_X, "keep_X")
    keep = check_keep(keep, net.sizes[-1])
    ref = check_ref(ref, keep_X.shape[0], keep, net.dtype)
    tol = checks.real("tol", tol, low=0.0, low_inclusive=False)
    max_iter = checks.whole_number("max_iter", max_iter)
    return keep_X, keep, ref, tol, max_iter, check_rcond(rcond)


# -- the field's rules (``baselines``) ----------------------------------------------------------
def check_memory(net, keep_X, keep_G):
    """(keep_X, keep_G) of a memory: keep_X (m, d), keep_G (m, K) or (K,)."""
    keep_X = check_inputs(check_net(net), keep_X, "keep_X")
    keep_G = checks.rows_or_vector("keep_G", keep_G, net.dtype, keep_X.shape[0], net.sizes[-1])
    return keep_X, keep_G


def check_agem(net, X, G, keep_X, keep_G):
    """(X, G, keep_X, keep_G) of ``baselines.agem``."""
    return (*check_XG(net, X, G), *check_memory(net, keep_X, keep_G))


def check_ewc(net, X, G, fisher, anchor, lam):
    """(X, G, fisher, anchor, lam) of ``baselines.ewc``: fisher and anchor dicts like params,
    every entry of fisher >= 0 (a diagonal Fisher), lam >= 0."""
    X, G = check_XG(net, X, G)
    fisher = checks.param_dict("fisher", fisher, net.param_shapes, net.dtype)
    if any(checks.count_negative(v) for v in fisher.values()):
        raise BadValue("fisher: expected a diagonal Fisher, every entry >= 0, got a negative "
                       "entry", argument="fisher")
    anchor = checks.param_dict("anchor", anchor, net.param_shapes, net.dtype)
    return X, G, fisher, anchor, checks.real("lam", lam, low=0.0)


def check_gpm_rule(threshold, cut):
    """(threshold, cut) of ``baselines.gpm_bases``: an energy fraction in (0, 1] (default 0.99)
    or an eigenvalue cut in [0, 1), not both."""
    if cut is not None and threshold is not None:
        raise BadValue(f"cut: expected either threshold or cut, not both, got threshold = "
                       f"{threshold!r} and cut = {cut!r}", argument="cut")
    if cut is not None:
        cut = checks.real("cut", cut, low=0.0)
        if cut >= 1.0:
            raise BadValue(f"cut: expected a fraction of the largest eigenvalue in [0, 1), got "
                           f"{cut}", argument="cut")
        return None, cut
    threshold = 0.99 if threshold is None else checks.real("threshold", threshold, low=0.0,
                                                             low_inclusive=False)
    if threshold > 1.0:
        raise BadValue(f"threshold: expected an energy fraction in (0, 1], got {threshold}",
                       argument="threshold")
    return threshold, None


def check_bases(net, bases, kind, name="previous", empty=True):
    """Bases (of class ``kind``) fit for ``net``: one basis per layer of each piece, of its input
    width + 1, in its dtype. None: empty bases where ``empty``, else refused."""
    if bases is None and empty:
        return [[np.zeros((n + 1, 0), dtype=net.dtype) for n in piece.mlp.sizes[:-1]]
                for piece in net.pieces()]
    if not isinstance(bases, kind):
        raise BadType(f"{name}: expected the Bases of gpm_bases, got {checks.describe(bases)}",
                      argument=name)
    want = [[n + 1 for n in piece.mlp.sizes[:-1]] for piece in net.pieces()]
    got = [[U.shape[0] for U in piece] for piece in bases.bases]
    if got != want:
        raise BadValue(f"{name}: expected bases of layer inputs {want} (this model's), got "
                       f"{got}", argument=name)
    return [[U.astype(net.dtype, copy=False) for U in piece] for piece in bases.bases]


def memory_batches(net, keep_X):
    """keep_X as checked (rows, d) batches: one array, or any iterable of them, read lazily; an
    iterable that yields no batch is refused once it is spent."""
    if isinstance(keep_X, np.ndarray) or (isinstance(keep_X, (list, tuple)) and keep_X
                                          and np.ndim(keep_X[0]) < 2):
        yield check_inputs(net, keep_X, "keep_X")
        return
    if isinstance(keep_X, (str, bytes)) or not hasattr(keep_X, "__iter__"):
        raise BadType(f"keep_X: expected an array (m, {net.sizes[0]}) or an iterable of such "
                      f"batches, got {checks.describe(keep_X)}", argument="keep_X")
    count = 0
    for batch in keep_X:
        count += 1
        yield check_inputs(net, batch, "keep_X")
    if not count:
        raise BadValue("keep_X: expected at least one batch of rows, got none", argument="keep_X")
