"""Measurements: plain NumPy results for the table, the tutorials and the figures (no
matplotlib here). One module per topic, each beside the tutorial and the figures it feeds:

    rules          the one registry of rules: each fix as an object that takes a step
    question       the problem: one plain step, every stage of backprop, the tangent kernel
                   by layer, the first-order prediction, what one step moves     (tutorials 01-02)
    answer_replay  the accepted answer's TensorFlow script, replayed             (tutorial 03)
    splitting      freeze, separate heads, two towers: what out2 can still learn (tutorial 04)
    drift          out1's drift under each rule: one step over lrs (and the same step taken
                   by a framework, beside it), many steps, a slice of input space (tutorials 05-07)
    projection     projection in a two-parameter picture                         (tutorial 05)
    optimizers     Adam and projection, in either order                          (tutorial 06)
    table          every fix side by side, and the guarantees measured           (tutorial 06)
    fits           the log-log slope fit, and the order of a drift it measures
    projection_cost  the bench's saved run, as the arrays of projection_cost.png
    continual      the fixes on a real task: digits 0-4, then 5-9 holding outputs 0-4; the
                   cost of holding 5 m constraints                               (tutorial 08)
    explorer       a few steps of one fix at any lr, steps and lam: the explorer's states
    motion         the frames of the projected step's animation (projection_step.gif)

Each function starts from a named setup (``mlp_ref.setups``) and never modifies a network
handed to it. ``mlp_ref.classroom.report`` turns the results into text, ``mlp_ref.plots`` into figures.
"""
# continual is imported where it is used (``from mlp_ref.measurements import continual``), not
# here: ``python -m mlp_ref.measurements.continual`` runs it as a script, which must not be
# imported before it runs.
from . import (
               answer_replay,
               drift,
               explorer,
               fits,
               motion,
               optimizers,
               projection,
               projection_cost,
               question,
               rules,
               splitting,
               table,
)

__all__ = ["answer_replay", "drift", "explorer", "fits", "motion", "optimizers", "projection",
           "projection_cost", "question", "rules", "splitting", "table"]
