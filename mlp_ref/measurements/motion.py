"""What the animations move (``python -m mlp_ref animate``), as plain arrays: the frames of one
step of naive, projected and restored on out1's curved level set.

The other two animations need no measurement of their own: backprop stage by stage draws
``question.backprop_stages``, the continual-learning run draws ``continual.run()`` step by step.
"""
from __future__ import annotations

import numpy as np


def projection_step_frames(geometry, grow=8):
    """The frames of one step on ``projection.projection_geometry``'s two-parameter toy.

    The naive and the projected step grow together from theta0 to their full length lr in
    ``grow`` frames (fraction t = 1/grow, ..., 1 of the step); then the restoring steps of
    ``geometry["restore_path"]`` are taken one per frame. At every frame, out1's change from
    theta0 at each point drawn:

        naive      theta0 - t lr D                 drift O(t lr)
        projected  theta0 - t lr D_p               drift O((t lr)^2): the level set curves
        restored   the restore path's k-th point   drift -> round-off

    Returns a list of dicts, one per frame: ``t`` (the fraction of the step), ``naive`` and
    ``projected`` (2,), ``restore`` (k + 1, 2: the points of the restore path reached so far,
    k = 0 while the step grows), ``d_out1`` {"naive", "project", "project+restore"} -> float
    (out1(point) - out1(theta0); restored: the last restore point's, nan before the first
    restoring step) and ``caption``.
    """
    toy, t0 = geometry["toy"], geometry["theta0"]
    ref = geometry["ref"]
    naive_end, proj_end = geometry["naive"], geometry["projected"]
    path = geometry["restore_path"]
    out1 = lambda theta: float(toy.outputs(theta)[0] - ref)   # noqa: E731
    frames = []
    for t in np.arange(1, grow + 1) / grow:
        naive, proj = t0 + t * (naive_end - t0), t0 + t * (proj_end - t0)
        frames.append({"t": float(t), "naive": naive, "projected": proj, "restore": path[:1],
                       "d_out1": {"naive": out1(naive), "project": out1(proj),
                                  "project+restore": np.nan},
                       "caption": f"the step grows: {t:.0%} of lr"})
    for k in range(1, len(path)):
        frames.append({"t": 1.0, "naive": naive_end, "projected": proj_end, "restore": path[:k + 1],
                       "d_out1": {"naive": out1(naive_end), "project": out1(proj_end),
                                  "project+restore": out1(path[k])},
                       "caption": f"restoring step {k} of {len(path) - 1} (Gauss-Newton)"})
    return frames
