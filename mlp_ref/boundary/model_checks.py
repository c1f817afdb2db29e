"""The checks that must know what a model of this package is (``network.Model``), which ``checks``
cannot hold (``network`` imports it): of the same kind, ``check_*(name, value, got)``."""
from __future__ import annotations

import reprlib
from functools import partial

import numpy as np

from ..network import MLP, Model
from .checks import (BadType, BadValue, check_array, check_inputs, check_params_like, check_real, check_whole,
                     describe, finite)


def check_net(name, net, got=None, kind=Model):
    """A model of this package (MLP, SplitHeads, TwoTower; an MLP for ``check_mlp``), else TypeError."""
    if not isinstance(net, kind):
        expected = "an MLP" if kind is MLP else "a model of mlp_ref (MLP, SplitHeads, TwoTower)"
        raise BadType(f"{name}: expected {expected}, got {describe(net)}", argument=name)
    return net


check_mlp = partial(check_net, kind=MLP)


#: Each refinement pass multiplies the error by about eps * cond(J J^T): a few reach roundoff
#: wherever refining converges at all, so more than this is a mistake (it would only take time).
MAX_REFINE = 100


def check_refine(name, refine, got=None):
    """A whole number of refinement passes, 0 .. MAX_REFINE."""
    if check_whole(name, refine, minimum=0) > MAX_REFINE:
        raise BadValue(f"{name}: expected at most {MAX_REFINE} passes (each multiplies the error by about "
                       f"eps * cond(J J^T): a few reach roundoff), got {refine}", argument=name)
    return int(refine)


def check_trainable(name, trainable, got):
    """None (the output layer's parameters, ``net.output_keys``), or parameter names of the net."""
    known, trainable = list(got["net"].params), got["net"].output_keys if trainable is None else trainable
    trainable = [trainable] if isinstance(trainable, str) else trainable
    if not hasattr(trainable, "__iter__") or not all(isinstance(k, str) for k in trainable):
        came = describe(trainable) if not hasattr(trainable, "__iter__") else reprlib.repr(list(trainable))
        raise BadType(f"{name}: expected parameter names (strings) from {known}, got {came}", argument=name)
    if unknown := [k for k in trainable if k not in known]:
        raise BadValue(f"{name}: unknown parameter names {reprlib.repr(unknown)}; known: {known}", argument=name)
    return list(trainable)


def check_ref(name, ref, got):
    """ref as (n, q), n the rows of keep_X (X in the penalty, where None stays None), q the kept outputs."""
    if ref is None and "keep_X" not in got:
        return None
    n, q = got["keep_X" if "keep_X" in got else "X"].shape[0], len(got["keep"])
    ref = check_array(name, ref, got["net"].dtype)
    ref = ref[:, None] if ref.shape == (n,) and q == 1 else ref
    if ref.shape != (n, q):
        raise BadValue(f"{name}: expected shape ({n}, {q}){f' or ({n},)' if q == 1 else ''} (rows of keep_X, kept "
                       f"outputs), got shape {ref.shape}", argument=name)
    return ref


def check_fisher(name, fisher, got):
    """A diagonal Fisher: a dict like params (or like ``got``'s shapes and dtype), every entry >= 0."""
    fisher = check_params_like(name, fisher, got, got.get("shapes"), got.get("dtype"))
    if negative := [k for k, v in fisher.items() if np.count_nonzero(v < 0)]:
        raise BadValue(f"{name}: expected a diagonal Fisher, every entry >= 0, got a negative entry in {negative}",
                       argument=name)
    return fisher


def check_fishers(name, fishers, got):
    """``ewc_merge``'s Fishers: diagonal Fishers, each with the first's keys, shapes and float dtype (kept in got)."""
    if not isinstance(fishers, (list, tuple)):
        raise BadType(f"{name}: expected a list of diagonal Fishers (dicts like params), got {describe(fishers)}",
                      argument=name)
    if not fishers or not isinstance(fishers[0], dict) or not fishers[0]:
        raise BadValue(f"{name}: expected at least one Fisher (a dict like params), got {reprlib.repr(fishers)}",
                       argument=name)
    first = {k: np.asarray(v) for k, v in fishers[0].items()}
    got["shapes"] = {k: v.shape for k, v in first.items()}
    got["dtype"] = next((v.dtype for v in first.values() if v.dtype.kind == "f"), np.dtype(np.float64))
    return [check_fisher(f"{name}[{t}]", f, got) for t, f in enumerate(fishers)]


def check_anchors(name, anchors, got):
    """``ewc_merge``'s anchors: one per Fisher, each a dict with their keys and shapes, finite."""
    if not isinstance(anchors, (list, tuple)) or len(anchors) != len(got["fishers"]):
        raise BadValue(f"{name}: expected one anchor per Fisher ({len(got['fishers'])}), got {describe(anchors)}",
                       argument=name)
    return [check_params_like(f"{name}[{t}]", a, got, got["shapes"], got["dtype"]) for t, a in enumerate(anchors)]


def check_threshold(name, threshold, got=None):
    """GPM's energy fraction in (0, 1], or None."""
    if threshold is not None and check_real(name, threshold, low=0.0, strict=True) > 1.0:
        raise BadValue(f"{name}: expected an energy fraction in (0, 1], got {threshold}", argument=name)
    return None if threshold is None else float(threshold)


def check_cut(name, cut, got):
    """An eigenvalue cut in [0, 1) instead of a threshold (not both), or None."""
    if cut is not None and got["threshold"] is not None:
        raise BadValue(f"{name}: expected either threshold or cut, not both, got threshold = "
                       f"{got['threshold']!r} and cut = {cut!r}", argument=name)
    return cut if cut is None else check_real(name, cut, low=0.0, below=1.0,
                                              what="a fraction of the largest eigenvalue in [0, 1)")


#: How far U^T U of a basis may be from I, entry by entry, in d eps (d: U's rows): an entry is a dot product of
#: d terms of unit vectors, rounding by up to d eps; further off, GPM's I - U U^T would not be a projection.
ORTHONORMAL_D_EPS = 4


def check_bases(name, bases, got):
    """``gpm_bases``'s Bases fit for the net (None stays None for ``previous``): for each piece, a basis per layer
    of its input width + 1, a 2-d array of the net's dtype (one made in another holds that one's round-off), finite
    and orthonormal to ORTHONORMAL_D_EPS d eps (not recomputed for those gpm_bases made and left read-only)."""
    if bases is None and name == "previous":
        return None
    if type(bases).__name__ != "Bases":          # baselines.Bases, which imports this module
        raise BadType(f"{name}: expected the Bases of gpm_bases, got {describe(bases)}", argument=name)
    net, ours = got["net"], getattr(bases, "made_by_gpm_bases", False)
    want = [[n + 1 for n in piece.mlp.sizes[:-1]] for piece in net.pieces()]
    if (have := [[(getattr(U, "shape", ()) or (None,))[0] for U in piece] for piece in bases.bases]) != want:
        raise BadValue(f"{name}: expected bases of layer inputs {want} (this model's), got {have}", argument=name)
    for where, U in ((f"{name}.bases[{p}][{l}]", U) for p, Us in enumerate(bases.bases) for l, U in enumerate(Us)):
        if not isinstance(U, np.ndarray) or U.ndim != 2 or U.dtype != net.dtype:
            raise BadType(f"{name}: expected every basis a 2-d array of the network's dtype {net.dtype}, got {where}: "
                          f"{describe(U)} (bases made for another dtype hold only its round-off)", argument=name)
        if not finite(U):
            raise BadValue(f"{name}: expected finite bases, got {where} with non-finite entries", argument=name)
        off = 0.0 if ours and not U.flags.writeable else np.max(np.abs(U.T @ U - np.eye(U.shape[1])), initial=0.0)
        if off > (bound := ORTHONORMAL_D_EPS * U.shape[0] * float(np.finfo(U.dtype).eps)):
            raise BadValue(f"{name}: expected orthonormal bases (max |U^T U - I| <= {bound:.3g}, {ORTHONORMAL_D_EPS} d "
                           f"eps), got {where} with max |U^T U - I| = {off:.3g}", argument=name)
    return bases


def check_batches(name, keep_X, got):
    """keep_X as (rows, d) batches: one array, or an iterable of them read lazily (refused if it yields none)."""
    if isinstance(keep_X, np.ndarray) or (isinstance(keep_X, (list, tuple)) and keep_X and np.ndim(keep_X[0]) < 2):
        return [check_inputs(name, keep_X, got)]
    if isinstance(keep_X, (str, bytes)) or not hasattr(keep_X, "__iter__"):
        raise BadType(f"{name}: expected an array (m, {got['net'].sizes[0]}) or an iterable of such batches, got "
                      f"{describe(keep_X)}", argument=name)
    return _batches(name, keep_X, got)


def _batches(name, keep_X, got):
    count = 0
    for count, batch in enumerate(keep_X, 1):
        yield check_inputs(name, batch, got)
    if not count:
        raise BadValue(f"{name}: expected at least one batch of rows, got none", argument=name)
