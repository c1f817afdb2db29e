"""The animations' drawings (``mlp_ref.classroom.animations`` writes them as GIFs): each function draws the
first frame with the figures' own plot functions and returns the figure, its frames' update and
the frame count. ``gif_bytes`` runs matplotlib's FuncAnimation through the Pillow writer.

    backprop_stages_frames   backprop of G = [0, -1] stage by stage (``question.backprop_stages``)
    projection_step_frames   one step of naive, projected, restored (``motion.projection_step_frames``)
    continual_steps_frames   the continual-learning run step by step (``continual.run()``)
"""
from __future__ import annotations

import io
import os

import numpy as np
from matplotlib.animation import FuncAnimation, PillowWriter
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from PIL import Image  # matplotlib's own dependency

from .axes import ROUNDOFF_ROW, ROUNDOFF_TEXT, ZERO_FLOOR, placed, roundoff_band, theta_plane
from .continual import continual_steps
from .question import backprop_stages, board
from .style import MARKERS, PALETTE, new_figure, sci, styled


def freeze_layout(fig):
    """Lay ``fig`` out once (constrained layout, on its current content), then keep every axes
    where it is: later frames that hide or change content do not move the panels."""
    fig.draw_without_rendering()
    fig.set_layout_engine("none")


class _Frames(PillowWriter):
    """matplotlib's Pillow writer, keeping the frames (``finish`` writes nothing): ``gif_bytes``
    writes them, with one duration per frame, to a file object."""

    def finish(self):
        self.frames = list(self._frames)


def gif_bytes(fig, update, n_frames, durations, dpi):
    """The GIF of ``update(0)``, ..., ``update(n_frames - 1)`` drawn on ``fig`` (FuncAnimation,
    Pillow writer), each frame shown ``durations[i]`` milliseconds, looping. No time stamp:
    the same drawing gives the same bytes."""
    if len(durations) != n_frames:
        raise ValueError(f"durations: expected {n_frames} values, got {len(durations)}")
    anim = FuncAnimation(fig, update, frames=n_frames, init_func=lambda: [], blit=False,
                         repeat=False, cache_frame_data=False)
    writer = _Frames(fps=10)
    anim.save(os.devnull, writer=writer, dpi=dpi)       # the frames stay in writer.frames
    frames = one_palette([frame.convert("RGB") for frame in writer.frames])
    out = io.BytesIO()
    frames[0].save(out, format="GIF", save_all=True, append_images=frames[1:],
                   duration=list(durations), loop=0, optimize=False)
    return out.getvalue()


def one_palette(frames, colours=96):
    """The frames in one shared palette of at most ``colours`` colours, without dithering: a
    figure's flat colours need few, and with one palette and no dither noise consecutive frames
    differ only where the drawing does, which the GIF stores as small patches."""
    width, height = frames[0].size
    sample = Image.new("RGB", (width, height * 3))
    for i, frame in enumerate([frames[0], frames[len(frames) // 2], frames[-1]]):
        sample.paste(frame, (0, i * height))
    palette = sample.quantize(colours, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    return [frame.quantize(palette=palette, dither=Image.Dither.NONE) for frame in frames]


# -- backprop, stage by stage --------------------------------------------------------------------
#: The colour of the frame around the stage just computed.
CURRENT = "#E69F00"


@styled
def backprop_stages_frames(result, captions, title, final):
    """Backprop stage by stage: ``plots.backprop_stages`` of ``result`` (its backward stages),
    drawn whole, then shown one more stage per frame, the newest framed, with ``captions[name]``
    (what that stage shows) under ``title``: frame 0 shows none, frame k the first k; the last
    frame shows them all with the line ``final``.

    Returns (fig, update, n_frames, names): ``update(k)`` draws frame k; ``names`` the stages in
    the order drawn (one axes each, ``fig.axes[i]`` is ``names[i]``)."""
    names = list(result["backward"])
    fig = backprop_stages(result, title=f"{title}\n{final}")    # laid out with two lines of title
    freeze_layout(fig)
    axes = fig.axes[:len(names)]
    frames = [Rectangle((0, 0), 1, 1, transform=ax.transAxes, fill=False, lw=4, ec=CURRENT,
                        clip_on=False, zorder=10) for ax in axes]
    for ax, frame in zip(axes, frames):
        ax.add_artist(frame)

    def update(k):
        """Frame 0: no stage yet; frame k = 1..n: stages 1..k, the k-th framed; frame n + 1:
        every stage, none framed."""
        for i, (ax, frame) in enumerate(zip(axes, frames)):
            ax.set_visible(i < k)
            frame.set_visible(i == k - 1)
        if k == 0:
            line = "the forward pass is done; G arrives at the output as dout"
        elif k <= len(names):
            name = names[k - 1]
            line = (f"stage {k} of {len(names)}:  {name} = {board(result['formulas'][name])}"
                    f"  \u2014  {captions[name]}")
        else:
            line = final
        fig.suptitle(f"{title}\n{line}")
        return axes
    update(len(names) + 1)
    return fig, update, len(names) + 2, names


# -- one step on out1's level set ---------------------------------------------------------------
_NAMES = {"naive": "naive", "project": "projected", "project+restore": "projected + restored"}


@styled
def projection_step_frames(geometry, frames):
    """One step of naive, projected and restored on out1's curved level set, moving.

    ``geometry`` is ``projection.projection_geometry(...)`` (the contours, the level set, the
    tangent), ``frames`` is ``motion.projection_step_frames(geometry)``. Left: the theta-plane
    as in projection_geometry.png, with the naive and projected arrows growing and then the
    restoring steps; right: |out1's change| of each point on a log axis, exact zeros on the
    "exactly 0" row. Returns (fig, update, n_frames)."""
    fig = new_figure(11.0, 5.4)
    left, right = fig.subplots(1, 2, width_ratios=[1.25, 1])
    t1, t2, out1 = geometry["theta1"], geometry["theta2"], geometry["out1"]
    T1, T2 = np.meshgrid(t1, t2)
    t0, ref = geometry["theta0"], geometry["ref"]
    cs = left.contour(T1, T2, out1, levels=12, colors="0.8", linewidths=0.9,
                      negative_linestyles="solid")
    left.clabel(cs, fontsize=9, fmt="%.2f")
    left.contour(T1, T2, out1, levels=[ref], colors="black", linewidths=2.5)
    span = 2 * float(np.ptp(np.vstack([t0, geometry["naive"], geometry["projected"]]), axis=0).max())
    tangent = np.array([t0 - span * geometry["tangent"], t0 + span * geometry["tangent"]])
    left.plot(tangent[:, 0], tangent[:, 1], "--", color="0.45", lw=1.3)
    left.plot(*t0, "o", color="black", ms=8, zorder=4)
    left.annotate("\u03b8\u2080", t0, xytext=(8, 6), textcoords="offset points", fontsize=13)
    left.legend(handles=[Line2D([], [], color="black", lw=2.5, label=f"level set out1 = {ref:.3f}"),
                         Line2D([], [], color="0.45", lw=1.3, ls="--", label="its tangent at \u03b8\u2080"),
                         *[Line2D([], [], color=PALETTE[k], lw=2.2, label=_NAMES[k]) for k in _NAMES]],
                loc="upper right", fontsize=10, frameon=True, framealpha=0.9)
    theta_plane(left, t1, t2, f"out1's contours over \u03b8; one step of lr = {geometry['lr']:g}")

    order = list(_NAMES)
    right.set_xscale("log")
    right.set_xlim(ZERO_FLOOR / 5, 1e6)                 # room for the values beside the bars
    right.set_ylim(-0.6, len(order) - 0.4)
    right.set_yticks(range(len(order)), [_NAMES[k] for k in order])
    right.invert_yaxis()
    roundoff_band(right, horizontal=False, label=False)
    right.set_xticks([1e-18, 1e-12, 1e-6, 1.0])
    right.set_xlabel(f"|out1(\u03b8) \u2212 out1(\u03b8\u2080)|, log scale\n"
                     f"shaded: round-off (\u2264 {ROUNDOFF_TEXT}); dotted: exactly 0")
    right.set_title("how far out1 moved")
    fig.suptitle("Projection steps along the tangent: it leaves the curved level set by O(lr\u00b2);\n"
                 "restoring steps bring \u03b8 back onto it")
    freeze_layout(fig)
    drawn = []

    def on_screen(theta):
        """theta to 1e-9 of the picture's span: far below a pixel, far above round-off, whose
        last bits (another CPU's) would otherwise move an arrow's end across a pixel's edge."""
        return np.round(np.asarray(theta) / span, 9) * span

    def arrow(start, end, colour):
        return left.annotate("", xy=end, xytext=start,
                             arrowprops={"arrowstyle": "-|>", "color": colour, "lw": 2.2,
                                         "mutation_scale": 18, "shrinkA": 0, "shrinkB": 0})

    def update(k):
        f = frames[k]
        for artist in drawn:
            artist.remove()
        drawn.clear()
        drawn.append(arrow(t0, on_screen(f["naive"]), PALETTE["naive"]))
        drawn.append(arrow(t0, on_screen(f["projected"]), PALETTE["project"]))
        path = on_screen(f["restore"])
        for a, b in zip(path[:-1], path[1:]):
            if np.linalg.norm(b - a) > 1e-3 * span:
                drawn.append(arrow(a, b, PALETTE["project+restore"]))
        if len(path) > 1:
            drawn.append(left.plot(*path[-1], marker=MARKERS["project+restore"], ms=12,
                                   color=PALETTE["project+restore"], zorder=5)[0])
        for i, name in enumerate(order):
            d = f["d_out1"][name]
            if np.isnan(d):
                drawn.append(right.text(ZERO_FLOOR, i, "  (after the step)", va="center",
                                        fontsize=10, color="0.5"))
                continue
            width = float(placed(d, exact=False))          # none of the three is exact
            drawn.append(right.barh(i, width, left=ZERO_FLOOR / 5, height=0.55, color=PALETTE[name])[0])
            text = "0 exactly" if d == 0.0 else "round-off" if width == ROUNDOFF_ROW else sci(abs(d))
            drawn.append(right.text(width * 1.6, i, text, va="center", fontsize=11))
        drawn.append(fig.text(0.5, 0.005, f["caption"], ha="center", va="bottom", fontsize=12,
                              style="italic"))
        return drawn
    update(len(frames) - 1)
    return fig, update, len(frames)


# -- the continual-learning run, step by step ---------------------------------------------------
def first_steps(result, k):
    """``continual.run()``'s result as it stood after k steps of the second task: every run's
    old and new accuracies up to step k (the rest as is)."""
    return dict(result, runs=[dict(r, old_acc=r["old_acc"][:k + 1], new_acc=r["new_acc"][:k + 1])
                              for r in result["runs"]])


@styled
def continual_steps_frames(result):
    """``plots.continual_steps`` of ``result`` drawn again at every step of the second task: frame
    k holds the accuracies after k steps (k = 0, the end of the first task, ..., the last step).
    Returns (fig, update, n_frames)."""
    steps = len(result["runs"][0]["old_acc"]) - 1
    fig = new_figure(12.0, 5.8)
    axes = fig.subplots(1, 2, sharex=True)

    def update(k):
        for ax in axes:
            ax.cla()
        for old in list(fig.legends):                 # the last frame's legend: drawn anew below
            old.remove()
        continual_steps(first_steps(result, k), axes=axes)     # its legend below the panels
        for ax in axes:
            ax.set_xlim(-0.5, steps + 0.5)
        return axes
    update(steps)
    freeze_layout(fig)
    return fig, update, steps + 1
