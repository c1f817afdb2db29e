"""One function per figure; the only place matplotlib is imported (``import mlp_ref`` never
imports this package). Each function takes a result of ``mlp_ref.measurements`` (plain arrays
and dicts) and optional ``axes=``, draws it, computes nothing, and returns the Figure.

    style        colours, markers, labels, the style sheet, axes handling
    axes         the log axes shared by the drift figures (exact zeros, round-off)
    question     step_effect (seed_problem on the seed setup), backprop_stages, network_fixes, tangent_kernel
    projection   projection_geometry, projection_cost
    drift        drift_vs_lr, frameworks_drift_vs_lr, trajectories, pareto, heldout_drift
    optimizers   optimizer_order
    continual    continual_tradeoff, continual_steps, continual_cost (the real task)
    field        field_accuracy, field_acc_bwt, scale_cost (the field's baselines, the ladder)
"""
from .axes import ZERO_FLOOR
from .continual import continual_cost, continual_steps, continual_tradeoff
from .field import field_acc_bwt, field_accuracy, scale_cost
from .drift import drift_vs_lr, frameworks_drift_vs_lr, heldout_drift, pareto, trajectories
from .optimizers import optimizer_order
from .projection import projection_cost, projection_geometry
from .question import backprop_stages, network_fixes, seed_problem, step_effect, tangent_kernel
from .style import MARKERS, PALETTE

__all__ = ["MARKERS", "PALETTE", "ZERO_FLOOR", "backprop_stages", "continual_cost", "continual_steps",
           "continual_tradeoff", "drift_vs_lr", "field_acc_bwt", "field_accuracy", "frameworks_drift_vs_lr",
           "heldout_drift",
           "network_fixes", "optimizer_order", "pareto", "projection_cost", "projection_geometry",
           "scale_cost", "seed_problem", "step_effect", "tangent_kernel", "trajectories"]
