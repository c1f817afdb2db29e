"""The one registry of rules: each answer to the question as an object that takes a step.

A rule turns (net, X, G) into a direction D with ``mlp_ref.fixes`` and steps
theta <- theta - lr D. A combined rule is its own object (``WithRestore``: the step of
another rule, then ``fixes.restore`` back onto out1's starting values), never a name to be
parsed. Every rule here holds output 0 (out1) on the batch X.
"""
from __future__ import annotations

import numpy as np

from .. import fixes

#: The answer's mask: hide out1 from the loss, keep out2.
MASK = np.array([0.0, 1.0])

#: The penalty weight of the table. Gradient descent on lam/2 ||O_1 - ref||^2 alone is
#: stable only while lr * lam * lambda_max(J_1 J_1^T) < 2; lambda_max is ~15 (seed) and
#: ~166 (visible) at the start and changes as the network trains, so with the table's lrs a
#: lam of 10 diverges within a few dozen steps. 0.5 stays stable on both.
PENALTY_LAM = 0.5


class Rule:
    """A named rule: ``direction(net, X, G, ref)`` returns D, where ref holds out1's starting
    values on X (what a penalty pulls back to); ``guarantee`` says, in one line, what the rule
    promises for out1; ``settings`` are its own numbers a table shows beside it (the penalty's
    lam); ``exact``: out1's drift is 0.0 by an identity of the rule (freezing: out1 reads no
    parameter the step moves), not by the luck of rounding (a figure draws a 0.0 of any other
    rule as round-off: on another CPU it is 1e-16)."""

    def __init__(self, name, direction, guarantee, settings=None, exact=False):
        self.name, self.direction, self.guarantee = name, direction, guarantee
        self.settings = dict(settings or {})
        self.exact = exact

    def step(self, net, X, G, lr, ref):
        """One step in place: theta <- theta - lr D. Returns net."""
        return net.step(self.direction(net, X, G, ref), lr)

    def __repr__(self):
        return f"{type(self).__name__}({self.name!r})"


class WithRestore(Rule):
    """The step of ``rule``, then Gauss-Newton restoring steps (``fixes.restore``) back onto
    out1 = ref on X."""

    def __init__(self, rule, guarantee):
        super().__init__(f"{rule.name}+restore", rule.direction, guarantee)
        self.rule = rule

    def step(self, net, X, G, lr, ref):
        self.rule.step(net, X, G, lr, ref)
        fixes.restore(net, X, ref)
        return net


def penalty(lam=PENALTY_LAM):
    """The penalty rule L + lam/2 ||out1 - ref||^2 with weight ``lam`` (for sweeps over lam)."""
    return Rule("penalty", lambda net, X, G, ref: fixes.penalty(net, X, G, keep=[0], ref=ref, lam=lam),
                "none: first step = naive; a restoring force over many steps", {"lam": lam})


_PROJECT = Rule("project", lambda net, X, G, ref: fixes.project(net, X, G),
                "O(lr^2) on the batch, O(lr) on unseen inputs")

#: Every rule of the question, in the order of the table.
RULES = {rule.name: rule for rule in [
    Rule("naive", lambda net, X, G, ref: fixes.naive(net, X, G),
         "nothing: out1 drifts O(lr) through the shared layers"),
    Rule("masked", lambda net, X, G, ref: fixes.masked(net, X, G, MASK),
         "nothing here: G's out1 column is already 0, so the mask changes nothing"),
    Rule("freeze", lambda net, X, G, ref: fixes.freeze(net, X, G),
         "exactly 0 on every input at every lr (var_list = output layer only)", exact=True),
    _PROJECT,
    WithRestore(_PROJECT, "~1e-12 on the batch after Gauss-Newton restoring; O(lr) unseen"),
    penalty(),
    Rule("span", lambda net, X, G, ref: fixes.span_project(net, X, G),
         "~roundoff on the batch, but with keep_X = batch it freezes the hidden layers"),
]}


def get(rule):
    """A Rule from itself or its name in ``RULES``."""
    if isinstance(rule, Rule):
        return rule
    if rule not in RULES:
        raise ValueError(f"rule: expected a Rule or one of {list(RULES)}, got {rule!r}")
    return RULES[rule]


def resolve(rules):
    """``rules`` (names or Rule objects; None: every rule) as a list of Rules."""
    return list(RULES.values()) if rules is None else [get(r) for r in rules]
