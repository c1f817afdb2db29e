"""What the explorer shows (``python -m mlp_ref explore``): a few steps of one fix from the start
of a setup, as plain arrays, for any lr, number of steps and penalty weight lam.

Every state starts from the setup's network (``setups.SETUPS``: the seed's, or the visible one)
and takes ``steps`` steps of one rule of ``rules.RULES`` with G = [0, -1] (the penalty with the
weight asked). It reports what the step moved: out1 and out2 on every sample of the batch, and
every parameter. A rule that blows up (the penalty beyond lr lam lambda_max > 2, a large lr) is
stopped at the first step that overflows (the package's checks refuse it: ``BadValue``) or whose
parameters or outputs are not finite, and the state says so: ``taken`` steps, then ``diverged``.
"""
from __future__ import annotations

import numpy as np

from ..boundary.checks import BadValue
from ..setups import G_QUESTION, OUT1, OUT2, SETUPS
from . import rules as rules_

#: The fixes the explorer offers, in the order of its controls.
FIXES = ("naive", "masked", "freeze", "project", "project+restore", "penalty")


def rule(fix, lam=rules_.PENALTY_LAM):
    """The rule named ``fix``; the penalty with weight ``lam``."""
    if fix not in FIXES:
        raise ValueError(f"fix: expected one of {list(FIXES)}, got {fix!r}")
    return rules_.penalty(lam) if fix == "penalty" else rules_.get(fix)


def state(setup, fix, lr, steps, lam=rules_.PENALTY_LAM):
    """``steps`` steps of ``fix`` with learning rate ``lr`` from the start of ``setup``.

    Returns a dict: the arguments; ``delta`` (n, 2), out(after) - out(before) on the batch X;
    ``weights``, a dict like params of |theta_after - theta_before|; ``drift_batch`` = max
    |delta out1|; ``gain`` = mean delta out2; ``sizes``; ``taken``, the steps taken before the
    parameters stopped being finite (= steps unless ``diverged``).
    """
    if setup not in SETUPS:
        raise ValueError(f"setup: expected one of {list(SETUPS)}, got {setup!r}")
    net0, X, _ = SETUPS[setup]()
    chosen = rule(fix, lam)
    before = net0(X)
    ref = before[:, OUT1]
    net, taken = net0.copy(), 0
    with np.errstate(over="ignore", invalid="ignore"):        # a divergence is reported, not warned
        for _ in range(int(steps)):
            try:                            # a step, or its outputs, that overflow: refused, named
                trial = chosen.step(net.copy(), X, G_QUESTION, lr, ref)
                finite = all(np.all(np.isfinite(p)) for p in trial.params.values()) \
                    and np.all(np.isfinite(trial(X)))
            except BadValue:                # (the setup's own arguments are checked: an overflow)
                finite = False
            if not finite:
                break
            net, taken = trial, taken + 1
    delta = net(X) - before
    return {"setup": setup, "fix": fix, "lr": float(lr), "steps": int(steps), "lam": float(lam),
            "sizes": list(net0.sizes), "delta": delta,
            "weights": {k: np.abs(net.params[k] - net0.params[k]) for k in net0.params},
            "drift_batch": float(np.max(np.abs(delta[:, OUT1]))),
            "gain": float(np.mean(delta[:, OUT2])), "taken": taken, "diverged": taken < int(steps)}


def drift_curve(setup, fix, lrs, steps, lam=rules_.PENALTY_LAM):
    """max |delta out1| on the batch after ``steps`` steps of ``fix``, at each lr of ``lrs``:
    an array like lrs (``state``'s ``drift_batch``), and which of them diverged."""
    states = [state(setup, fix, lr, steps, lam) for lr in lrs]
    return (np.array([s["drift_batch"] for s in states]),
            np.array([s["diverged"] for s in states]))
