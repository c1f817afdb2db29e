"""Every fix side by side: the question's table after 1 and after many steps, and the table
of guarantees, each cell the measured order of a drift.
"""
from __future__ import annotations

import numpy as np

from . import drift, rules as rules_

#: The step sizes of ``measured_guarantees``: up to the visible setup's lr (where round-off
#: first shows in the rules that hold out1 exactly in exact arithmetic); slopes are fitted
#: over lr <= 1e-3, where the drifts are in their asymptotic regime.
GUARANTEE_LRS = np.logspace(-5, -2, 7)


def question_table(setups=("seed", "visible"), rules=None, long_steps=100):
    """The side-by-side table for the question: per setup and rule, after 1 and after
    ``long_steps`` steps at the setup's lr: out2 gain, max |delta out1| on the batch and
    on unseen inputs. Returns a list of row dicts (``n_probe``: how many unseen inputs;
    ``settings``: the rule's own numbers, the penalty's ``lam``)."""
    rows = []
    for setup in setups:
        traj = drift.trajectories(setup, rules=rules, steps=long_steps)
        for rule in rules_.resolve(rules):
            t = traj[rule.name]
            rows.append({"setup": setup, "rule": rule.name, "lr": traj["lr"], "settings": rule.settings,
                         "long_steps": long_steps, "n_probe": traj["n_probe"],
                         **{f"{key}_1": float(t[key][1]) for key in ("gain", "drift_batch", "drift_unseen")},
                         **{f"{key}_n": float(t[key][-1]) for key in ("gain", "drift_batch", "drift_unseen")}})
    return rows


def measured_guarantees(setups=("seed", "visible"), rules=None, lrs=GUARANTEE_LRS, max_lr=1e-3):
    """The order of out1's one-step drift in lr, on the batch and on unseen inputs, measured
    (``fits.drift_order``) for every rule on every setup: the guarantees table, from real runs.

    Returns a dict (setup, rule) -> {"batch": (label, slope), "unseen": (label, slope)}.
    """
    lrs = np.asarray(lrs, dtype=float)
    return {(setup, rule): order
            for setup in setups
            for rule, order in drift.orders(drift.one_step(setup, rules=rules, lrs=lrs), max_lr).items()}
