"""The explorer window's panels (``mlp_ref.classroom.explorable``; its page draws the same panels in
the browser, ``resources/explorer/page.js``): one state of ``measurements.explorer`` as out2's and
out1's change on every sample, out1's drift against lr with the current point marked, and the
network with the weights the steps moved (``plots.network_fixes``, one panel)."""
from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.widgets import RadioButtons, Slider

from ..measurements.fits import ROUNDOFF
from .axes import ROUNDOFF_ROW, ZERO_FLOOR, drift_text, exact, placed
from .question import network_fixes
from .style import FIX_LABELS, OUT_COLOURS, PALETTE, SETUP_LABELS, STYLE, new_figure, power, styled

#: The panels, in the order of ``panel_axes``.
PANELS = ("out2", "out1", "drift", "network")


def panel_axes(fig):
    """The four panels on ``fig`` (a Figure or a SubFigure): the two changes and the drift in a
    column on the left, the network on the right. Returns {name: Axes}."""
    grid = fig.add_gridspec(3, 2, width_ratios=[1.0, 1.05])
    return {"out2": fig.add_subplot(grid[0, 0]), "out1": fig.add_subplot(grid[1, 0]),
            "drift": fig.add_subplot(grid[2, 0]), "network": fig.add_subplot(grid[:, 1])}


def steps_text(n):
    """"1 step", "7 steps"."""
    return f"{n} step{'' if n == 1 else 's'}"


def state_title(state):
    """The line that says which state is drawn, with the steps taken (and where it diverged)."""
    lam = f", \u03bb = {state['lam']:g}" if state["fix"] == "penalty" else ""
    stopped = f" (of {state['steps']}: diverged at step {state['taken'] + 1})" if state["diverged"] else ""
    return (f"{SETUP_LABELS[state['setup']]}:  {FIX_LABELS.get(state['fix'], state['fix'])}, "
            f"{steps_text(state['taken'])} of lr = {state['lr']:g}{lam}{stopped}, G = [0, \u22121]")


def drift_ticks(ax, top):
    """The drift axis's ticks: the "exactly 0" row (ZERO_FLOOR), the round-off row (ROUNDOFF_ROW),
    and every few decades from 10^-12 up to ``top`` (above 10^0 too, where a diverging rule goes)."""
    hi = max(0, int(np.ceil(np.log10(top))))
    every = 6 if hi <= 6 else int(np.ceil((hi + 12) / 4))
    decades = list(range(-12, hi + 1, every))
    ax.set_yticks([ZERO_FLOOR, ROUNDOFF_ROW, *(10.0 ** k for k in decades)],
                  ["0", "round-off", *(power(k) for k in decades)])
    ax.yaxis.set_minor_locator(matplotlib.ticker.NullLocator())


@styled
def explorer_panels(state, curve, axes=None, fig=None):
    """Draw ``state`` (``explorer.state``) and its drift ``curve`` on the four panels.

    curve : {"lrs": (m,), "drift": (m,), "diverged": (m,) bool, "penalty_limit": float}:
            ``explorer.drift_curve`` of the same setup, fix, steps and lam (the state's own lr is
            marked on it), and ``fixes.penalty_limit`` at the setup's start (said when lr lam is past it)
    axes  : {name: Axes} (``panel_axes``), or None for a new figure
    fig   : where the title goes (a Figure or SubFigure; default: the axes' figure)
    Returns the Figure the panels are on.
    """
    if axes is None:
        fig = new_figure(13.0, 7.6)
        axes = panel_axes(fig)
    fig = fig if fig is not None else axes["out1"].figure
    delta = state["delta"]
    samples = np.arange(1, len(delta) + 1)
    for name, k in (("out2", 1), ("out1", 0)):
        ax = axes[name]
        ax.bar(samples, delta[:, k], color=OUT_COLOURS[name], width=0.6)
        ax.axhline(0.0, color="0.4", lw=0.8)
        ax.set_xticks(samples)
        ax.set_ylabel(f"\u0394{name}")
        ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))
    axes["out2"].set_title(f"\u0394out2 per sample: mean {state['gain']:+.3g} (asked to rise)", pad=14)
    drift = drift_text(state["drift_batch"], exact(state["fix"]))
    axes["out1"].set_title(f"\u0394out1 per sample: max |\u0394out1| = {drift} (asked to stay)", pad=14)
    axes["out1"].set_xlabel("sample")
    notes = [f"diverged at step {state['taken'] + 1} of {state['steps']}: shown after step {state['taken']}"
             ] if state["diverged"] else []
    limit = curve.get("penalty_limit")
    if state["fix"] == "penalty" and limit is not None and state["lr"] * state["lam"] > limit:
        notes.append(f"lr \u03bb = {state['lr'] * state['lam']:.3g} is past the penalty's stability limit "
                     f"2 / \u03bbmax(J\u2081J\u2081\u1d40) = {limit:.3g} (penalty_limit, at the start)")
    if notes:
        axes["out2"].text(0.5, 0.5, "\n".join(notes), transform=axes["out2"].transAxes, ha="center",
                          va="center", fontsize=11, color=PALETTE["naive"], fontweight="bold", wrap=True)

    ax = axes["drift"]
    lrs, drift = np.asarray(curve["lrs"]), np.asarray(curve["drift"])
    colour = PALETTE.get(state["fix"], "black")
    # the round-off band up to ROUNDOFF, above the row of exact zeros (drawn apart, not inside it)
    ax.axhspan(ZERO_FLOOR * 30, ROUNDOFF, color="0.93", zorder=0, lw=0)
    ax.axhline(ZERO_FLOOR, color="0.6", lw=0.8, ls=":", zorder=0)
    ax.axhline(ROUNDOFF_ROW, color="0.75", lw=0.8, ls="--", zorder=0)
    held = exact(state["fix"])
    ax.loglog(lrs, placed(drift, held), "-o", color=colour, ms=5)
    ax.loglog([state["lr"]], [placed(state["drift_batch"], held)], "o", ms=14, mfc="none", mec="black",
              mew=2.2, zorder=5)
    ax.axvline(state["lr"], color="0.5", lw=1, ls=":")
    top = max(1.0, 10 * float(np.max(drift)), 10 * state["drift_batch"])
    ax.set_ylim(ZERO_FLOOR / 5, top)
    drift_ticks(ax, top)
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())   # 32 marks nobody reads, each measured
    ax.set_xlabel("lr (ring: this lr; shaded: round-off; bottom row: exactly 0)")
    ax.set_ylabel("max |\u0394out1|")
    ax.set_title("out1's drift against lr")

    change = {"rules": [state["fix"]], "sizes": state["sizes"], "lr": state["lr"],
              state["fix"]: {"delta": state["weights"], "drift_batch": state["drift_batch"]}}
    if any(np.any(v > 0) for v in state["weights"].values()):
        before = set(axes["network"].figure.axes)
        network_fixes(change, axes=[axes["network"]])
        for bar in set(axes["network"].figure.axes) - before:       # its colour bar: say how many steps
            bar.set_ylabel(f"|\u0394 weight| (edges), |\u0394 bias| (nodes) after {steps_text(state['taken'])}")
    else:
        axes["network"].set_axis_off()
        axes["network"].text(0.5, 0.5, "no weight moved", ha="center", va="center",
                             transform=axes["network"].transAxes)
    fig.suptitle(state_title(state))
    return fig


# -- the live window: matplotlib widgets over the same panels ----------------------------------
class Explorer:
    """The panels of ``explorer_panels`` beside widgets that redraw them when moved: radio
    buttons for the setup and the fix, sliders for log10 lr, the number of steps and log10 lam.

    measure : ``measure(setup, fix, lr, steps, lam) -> (state, curve)``, called on every change
              (``mlp_ref.classroom.explorable.live_measure``: this module computes nothing)
    ranges  : {"lr": (lo, hi) of log10 lr, "steps": (lo, hi), "lam": (lo, hi) of log10 lam}
    start   : {"lr", "steps", "lam"}: the values shown first
    fig     : a Figure to draw on, or None for a new pyplot figure (a window, or a widget in
              Jupyter with ``%matplotlib widget``)

    After every redraw, ``state`` and ``curve`` hold what is drawn and ``axes`` the panels.
    """

    def __init__(self, measure, fix_names, setups, ranges, start, fig=None):
        self.measure = measure
        if fig is None:
            fig = plt.figure(figsize=(16.0, 8.4), layout="constrained")
        self.fig = fig
        controls, self.panels = fig.subfigures(1, 2, width_ratios=[0.2, 0.8])
        self.controls = controls
        with matplotlib.rc_context(STYLE):
            ax = controls.add_axes((0.08, 0.80, 0.86, 0.14))
            ax.set_title("setup", loc="left")
            self.setup = RadioButtons(ax, list(setups), active=0)
            ax = controls.add_axes((0.08, 0.40, 0.86, 0.36))
            ax.set_title("fix", loc="left")
            self.fix = RadioButtons(ax, list(fix_names), active=0)
            self.lr = Slider(controls.add_axes((0.08, 0.28, 0.62, 0.04)), "log\u2081\u2080 lr",
                             *ranges["lr"], valinit=float(np.log10(start["lr"])), valfmt="%.2f")
            self.steps = Slider(controls.add_axes((0.08, 0.18, 0.62, 0.04)), "steps",
                                *ranges["steps"], valinit=start["steps"], valstep=1, valfmt="%d")
            self.lam = Slider(controls.add_axes((0.08, 0.08, 0.62, 0.04)), "log\u2081\u2080 \u03bb",
                              *ranges["lam"], valinit=float(np.log10(start["lam"])), valfmt="%.2f")
        for slider in (self.lr, self.steps, self.lam):
            slider.label.set_position((0.0, 1.6))          # the name above the bar, not beside it
            slider.label.set_horizontalalignment("left")
            slider.on_changed(lambda _: self.redraw())
        for radio in (self.setup, self.fix):
            radio.on_clicked(lambda _: self.redraw())
        self.redraw()

    def values(self):
        """(setup, fix, lr, steps, lam) as the widgets now say."""
        return (self.setup.value_selected, self.fix.value_selected, float(10.0 ** self.lr.val),
                int(self.steps.val), float(10.0 ** self.lam.val))

    def redraw(self):
        """Measure the state the widgets name and draw it on fresh panels."""
        self.state, self.curve = self.measure(*self.values())
        self.panels.clear()
        self.axes = panel_axes(self.panels)
        explorer_panels(self.state, self.curve, axes=self.axes, fig=self.fig)
        self.fig.canvas.draw_idle()

    def show(self):
        plt.show()
