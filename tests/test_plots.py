"""Every plot function: returns a Figure with the expected axes, draws into the caller's axes,
states a takeaway, leaks no style, and draws exactly the data it is handed."""
import matplotlib
import matplotlib.text
import numpy as np
import pytest
from _drawn import cut_off_texts
from matplotlib.figure import Figure
from matplotlib.text import Text

from mlp_ref import fixes, plots
from mlp_ref.measurements import projection, projection_cost, question
from mlp_ref.measurements.fits import ROUNDOFF
from mlp_ref.setups import G_QUESTION, LR, seed_setup, visible_setup


@pytest.fixture(scope="module")
def stages_result():
    net, X, _ = seed_setup()
    return question.backprop_stages(net, X, G_QUESTION)


@pytest.fixture(scope="module")
def geometry():
    return projection.projection_geometry(grid=41)


@pytest.fixture(scope="module")
def effect():
    net, X, _ = seed_setup()
    return question.naive_step_effect(net, X, G_QUESTION)


def test_the_question_plots_have_their_axes(stages_result, effect):
    assert len(plots.seed_problem(effect).axes) == 3
    assert len(plots.backprop_stages(stages_result).axes) == 9
    assert len(plots.backprop_stages(stages_result, forward=True).axes) == 9 + 5
    assert len(plots.backprop_stages(stages_result, zeroed=stages_result["zeroed"]).axes) == 9


def test_every_fix_plot_has_its_axes_and_a_takeaway(drift_results, trajectories, slice_result,
                                                     order_result, geometry, tangent_kernels,
                                                     weight_changes):
    kernels = [tangent_kernels["seed"], tangent_kernels["visible"]]
    cost = projection_cost.projection_cost_data(projection_cost.load())
    expected = [
        (plots.network_fixes(weight_changes), 4 + 1),           # a panel per fix, a bar
        (plots.tangent_kernel(kernels), 2 * 4 + 2),             # 2 setups x 4 panels, 2 bars
        (plots.drift_vs_lr(drift_results), 2),
        (plots.trajectories(trajectories), 5),                  # 2 broken axes (2 each), gain
        (plots.pareto(trajectories), 4),                        # 2 broken axes (2 each)
        (plots.heldout_drift(slice_result), 4 + 1),
        (plots.optimizer_order(order_result), 3),
        (plots.projection_geometry(geometry), 2),
        (plots.projection_cost(cost), 2),
    ]
    for fig, n_axes in expected:
        assert isinstance(fig, Figure) and len(fig.axes) == n_axes
        assert fig.get_suptitle()                               # every figure states its takeaway
        assert fig.get_figwidth() * fig.dpi >= 1000


def test_a_text_past_the_figures_edge_is_named_and_the_figures_command_says_so(tmp_path, monkeypatch):
    from mlp_ref.classroom import figures
    from mlp_ref.plots.style import new_figure

    def drawn(title):
        fig = new_figure(4, 3)
        fig.subplots().set_title(title)
        return fig
    long = "a title far longer than the panel it stands over, " * 3
    assert cut_off_texts(drawn("short")) == [] and cut_off_texts(drawn(long)) == [long]
    monkeypatch.setitem(figures.FIGURES, "pareto.png", lambda plots: drawn(long))
    lines = []
    figures.write_all(str(tmp_path), names=["pareto.png"], log=lines.append)
    assert lines[0].endswith(f"  cut off at the figure's edge: {[long]}")
    # measured on the PNG only: svg and pdf are laid out at 72 dpi, which the check does not
    # measure (it named the tangent kernel's labels there, which lie inside)
    figures.write_all(str(tmp_path), names=["pareto.png"], log=lines.append, fmt="svg")
    assert "cut off" not in lines[1] and lines[1].endswith(" s)")


def test_titles_state_the_data_they_draw(trajectories):
    fig = plots.trajectories(dict(trajectories, n_probe=17, lr=0.125))
    titles = [ax.get_title() for ax in fig.axes]
    assert "out1 drift on 17 unseen inputs" in titles and "lr = 0.125" in fig.get_suptitle()
    assert not any("256" in t for t in titles)


def test_powers_of_ten_are_written_in_unicode_not_mathtext(drift_results, effect):
    """10^k is written 10⁻³ in plain text, on log axes and in labels: no TeX parser runs to
    draw a figure."""
    style = plots.style
    assert style.power(-12) == "10⁻¹²" and style.power(3, base=2) == "2³"
    assert style.sci(1.8e-4) == "1.8×10⁻⁴" and style.sci(-2.5e7) == "−2.5×10⁷"
    fmt = style.PowerFormatter(base=10, labelOnlyBase=False)
    assert [fmt(x) for x in (1e-3, 1.0, 100.0, 2e-3)] == ["10⁻³", "10⁰", "10²", "2×10⁻³"]
    for fig in (plots.drift_vs_lr(drift_results), plots.seed_problem(effect)):
        fig.draw_without_rendering()                            # the tick labels, as drawn
        texts = [t.get_text() for t in fig.findobj(Text) if t.get_visible()]
        assert not [t for t in texts if "$" in t]
        assert any("10⁻" in t for t in texts)


def test_a_long_log_axis_ticks_its_decades_only_and_a_short_one_keeps_its_labelled_minor_ticks(
        drift_results):
    @plots.style.styled
    def two_axes():
        fig = Figure()
        long, short = fig.subplots(1, 2)
        long.loglog([1e-6, 1e-3], [1.0, 2.0])             # x: 3 decades
        short.semilogy([0.0, 1.0], [2e-3, 8e-3])           # y: less than one
        return fig
    long, short = two_axes().axes
    assert len(long.xaxis.get_minorticklocs()) == 0 and len(long.xaxis.get_majorticklocs()) >= 4
    assert len(long.yaxis.get_minorticklocs()) > 0       # 1 to 2: short, left as it was
    minor = short.yaxis.get_minorticklocs()
    shown = [short.yaxis.get_minor_formatter()(x) for x in minor]
    assert len(minor) >= 5 and "4×10⁻³" in shown
    drawn = plots.drift_vs_lr(drift_results)
    assert all(len(ax.xaxis.get_minorticklocs()) == 0 for ax in drawn.axes[:2])


def test_the_seed_problems_title_says_how_much_less_out1_moves(effect):
    """The ratio of the data drawn: a power of ten when it is large (the seed setup's), the
    number itself when it is not (the visible setup's, about 5, is not "~10¹× less")."""
    assert 10 ** 3.5 < effect["ratio"] < 10 ** 4.5                  # 9,400 on the seed setup
    assert plots.seed_problem(effect).axes[2].get_title() == "out1 moves ~10\u2074\u00d7 less, but not 0"
    said = {4.94: "4.9", 49.4: "49", 99.7: "100", 9412.6: "10\u2074", 2e6: "10\u2076"}
    assert {ratio: plots.question.times(ratio) for ratio in said} == said
    net, X, _ = visible_setup()                                     # tutorial 02's figure
    visible = question.naive_step_effect(net, X, G_QUESTION, lr=LR["visible"])
    assert 4.5 < visible["ratio"] < 5.5                             # "about five times"
    assert plots.question.times(visible["ratio"]) == "4.9"


def test_plot_functions_draw_into_given_axes(stages_result, effect, geometry, trajectories,
                                             order_result):
    fig = Figure()
    axes = fig.subplots(1, 3)
    assert plots.seed_problem(effect, axes=axes) is fig
    sub = Figure().subfigures(1, 2)[1]
    assert plots.backprop_stages(stages_result, axes=sub.subplots(1, 9)) is sub.figure   # the root
    assert plots.optimizer_order(order_result, axes=Figure().subplots(1, 3)).axes
    assert plots.pareto(trajectories, axes=Figure().subplots(1, 4)).axes
    cost = projection_cost.projection_cost_data(projection_cost.load())
    one = Figure()
    assert plots.projection_cost(cost, axes=one.subplots()) is one and len(one.axes) == 1
    with pytest.raises(ValueError, match="^axes: expected 2"):
        plots.projection_geometry(geometry, axes=axes)
    with pytest.raises(ValueError, match="^axes: expected 5"):
        plots.trajectories(trajectories, axes=Figure().subplots(1, 2))


def test_plot_style_does_not_leak(geometry):
    import matplotlib
    before = matplotlib.rcParams["font.size"]
    plots.projection_geometry(geometry)
    assert matplotlib.rcParams["font.size"] == before


def test_palette_keeps_every_fix_and_has_a_marker_for_each():
    assert set(plots.PALETTE) == {"naive", "masked", "freeze", "heads", "towers", "project",
                                  "project+restore", "penalty", "span"}
    assert set(plots.MARKERS) == set(plots.PALETTE)
    assert len(set(plots.PALETTE.values())) == len(plots.PALETTE)


def test_an_exact_zero_is_drawn_on_the_zero_row(drift_results):
    fig = plots.drift_vs_lr(drift_results)
    freeze = [l for l in fig.axes[0].get_lines() if l.get_label().startswith("freeze")]
    assert len(freeze) == 1 and np.all(freeze[0].get_ydata() == plots.ZERO_FLOOR)
    box = [t.get_text() for t in fig.axes[0].texts if t.get_text().startswith("fitted slopes")]
    slope = drift_results[0]["orders"]["project"]["batch"][1]
    assert len(box) == 1 and f"project: {slope:.2f}" in box[0]


def test_stage_formulas_are_written_as_on_the_board(stages_result):
    from mlp_ref.plots.question import board
    formulas = {name: board(f) for name, f in stages_result["formulas"].items()}
    assert formulas["dW2"] == "a1\u1d40 dz2" and formulas["db1"] == "\u03a3\u1d62 dz1"
    assert formulas["dz1"] == "da1 \u2299 \u03c3\u2032(z1)" and formulas["da0"] == "dz1 W1\u1d40"
    assert formulas["dz2"] == "dout" and formulas["z1"] == "a0 W1 + b1" and formulas["a2"] == "id(z2)"


def test_the_batch_dots_are_filled_with_their_own_drift(slice_result):
    from matplotlib.collections import PathCollection
    from matplotlib.colors import to_rgba
    fig = plots.heldout_drift(slice_result)
    for ax, rule in zip(fig.axes, slice_result["rules"]):
        dots, = [c for c in ax.collections if isinstance(c, PathCollection)]
        assert np.array_equal(dots.get_offsets(), slice_result["batch"])
        image = ax.get_images()[0]
        at = slice_result["at_batch"][rule]
        # grey: 0.0 by the rule's identity (freeze); the bar's lower extension: round-off, a 0.0
        # of any other rule included (it is 1e-16 on another CPU); else the drift's own colour
        held = rule == "freeze"
        expected = [to_rgba("0.93") if d == 0 and held else image.cmap.get_under() if d <= ROUNDOFF
                    else image.cmap(image.norm(d)) for d in at]
        np.testing.assert_allclose(dots.get_facecolors(), expected, rtol=0, atol=1e-12)
        assert "at the batch: " in ax.get_title()
    assert "0.0 exactly" in fig.axes[slice_result["rules"].index("freeze")].get_title()


def test_the_projection_cost_takeaway_is_the_datas():
    cost = projection_cost.projection_cost_data(projection_cost.load())
    title = plots.projection_cost(cost).get_suptitle()
    assert f"at n = {cost['largest_dense_n']} constraints" in title
    assert f"{cost['speedup']:.0f}x faster" in title and f"{cost['memory_ratio']:.0f}x less memory" in title


def test_the_frameworks_drift_figure_draws_each_implementations_points_on_the_references():
    from mlp_ref.measurements import drift
    lrs = np.logspace(-5, -2, 4)

    def other(rule, net, X, G, lrs):             # another implementation: mlp_ref at 1.5 lr
        D = getattr(fixes, rule)(net, X, G)
        return [net.copy().step(D, 1.5 * lr)(X)[:, 0] for lr in lrs]
    results = [drift.one_step_beside({"other": other}, setup, lrs) for setup in ("seed", "visible")]
    fig = plots.frameworks_drift_vs_lr(results, missing=["TensorFlow 2"])
    assert len(fig.axes) == 2 and fig.get_figwidth() * fig.dpi >= 1000
    assert "not installed: TensorFlow 2" in fig.get_suptitle()
    for ax, res in zip(fig.axes, results):
        lines = {line.get_label(): line for line in ax.get_lines()}
        for rule in ("naive", "project"):
            for who, label in (("mlp_ref", f"{rule}: mlp_ref (NumPy)"), ("other", f"{rule}: other")):
                assert np.array_equal(lines[label].get_ydata(), res["drift"][who][rule])
        box = [t.get_text() for t in ax.texts if t.get_text().startswith("fitted slopes")]
        assert len(box) == 1 and f"naive: {res['slopes']['mlp_ref']['naive']:.2f}, " in box[0]
    everything = plots.frameworks_drift_vs_lr(results[:1])
    assert "not installed" not in everything.get_suptitle() and len(everything.axes) == 1


def test_the_frameworks_drift_figure_refuses_more_implementations_than_it_has_markers():
    four = {"who": ["mlp_ref", "a", "b", "c", "d"]}
    with pytest.raises(ValueError, match="^results: at most 3 implementations"):
        plots.frameworks_drift_vs_lr([four])


def test_a_measurement_is_read_only_and_leaves_what_it_shares_writable():
    """The figures' measurements are handed out read-only, as views: the seed's backprop stages
    keep G_QUESTION, the module's constant, and freezing it in place made every later caller's
    G read-only (the grader wrote a student's copy back into it, and failed)."""
    import numpy as np

    from mlp_ref.classroom import figures
    from mlp_ref.setups import G_QUESTION
    stages = figures.seed_stages()
    arrays = [v for v in stages.values() if isinstance(v, np.ndarray)]
    assert arrays and not any(a.flags.writeable for a in arrays)
    assert G_QUESTION.flags.writeable


def test_drift_vs_lrs_title_names_only_the_rules_it_draws():
    from mlp_ref.measurements import drift
    lrs = np.logspace(-4, -2, 3)
    two = drift.one_step("seed", rules=["naive", "project"], lrs=lrs, slope_max_lr=1e-3)
    two = plots.drift_vs_lr([two]).get_suptitle()
    assert "naive moves out1 O(lr), projection O(lr\u00b2)" in two
    assert not any(word in two for word in ("mask", "freez", "span", "restore"))
    every = plots.drift_vs_lr([drift.one_step("seed", lrs=lrs, slope_max_lr=1e-3)]).get_suptitle()
    for said in ("naive and mask move out1 O(lr)", "projection", "freezing holds it exactly (0.0)",
                 "span and restore to round-off"):
        assert said in every


def test_words_in_a_fixs_colour_keep_their_contrast_on_a_projector(weight_changes, geometry):
    # WCAG 2 level AA for text, 4.5:1 on white; the mask's orange (2.25:1) failed it as a title
    from mlp_ref.plots.style import PALETTE, TEXT_CONTRAST, contrast, text_colour
    assert contrast("#E69F00") < TEXT_CONTRAST and contrast("black") == pytest.approx(21)
    for fix in PALETTE:
        assert contrast(text_colour(fix)) >= TEXT_CONTRAST
    faint = {matplotlib.colors.to_hex(c) for c in PALETTE.values() if contrast(c) < TEXT_CONTRAST}
    for fig in (plots.network_fixes(weight_changes), plots.projection_geometry(geometry)):
        words = [t for t in fig.findobj(matplotlib.text.Text) if t.get_text().strip()]
        in_a_fix = [t for t in words if matplotlib.colors.to_hex(t.get_color()) in
                    {matplotlib.colors.to_hex(text_colour(f)) for f in PALETTE}]
        assert in_a_fix                                          # the fixes' names, in their colours
        assert not [t.get_text() for t in words if matplotlib.colors.to_hex(t.get_color()) in faint]


def test_the_exactly_0_row_is_ticked_0_not_read_as_a_decade(drift_results, trajectories):
    from mlp_ref.plots import ZERO_FLOOR
    for fig in (plots.drift_vs_lr(drift_results), plots.trajectories(trajectories)):
        log_axes = [ax for ax in fig.axes if ax.get_yscale() == "log" or ax.get_xscale() == "log"]
        ticked = []
        for ax in log_axes:
            for axis in (ax.yaxis, ax.xaxis):
                ticks = dict(zip(axis.get_majorticklocs(), (t.get_text() for t in axis.get_majorticklabels())))
                if ZERO_FLOOR in ticks:
                    ticked.append(ticks[ZERO_FLOOR])
        assert ticked and set(ticked) == {"0"}


def test_a_point_of_continual_tradeoff_under_another_is_drawn_again_over_it():
    from mlp_ref.plots.continual import OVERLAP, _covered
    at = [(0.853, 0.877), (0.853, 0.890), (0.5, 0.5), (0.62, 0.93), (0.62, 0.93)]
    runs = [{"new_acc": [x], "old_acc": [y]} for x, y in at]
    # towers under project m=128 (0.013 apart), freeze under span 128 (the same point)
    assert _covered(runs, [60, 60, 60, 60, 60]) == [60, 0, 0, 60, 0]
    assert 0.013 < OVERLAP
    far = [{"new_acc": [0.0], "old_acc": [0.0]}, {"new_acc": [OVERLAP * 1.01], "old_acc": [0.0]}]
    assert _covered(far, [60, 60]) == [0, 0]


def test_continual_steps_legend_lies_over_no_data():
    steps = np.arange(21)
    runs = [{"fix": fix, "m": m, "old_acc": 1 - steps / 40, "new_acc": steps / 21}
            for fix, m in plots.continual.STEP_RUNS]
    fig = plots.continual_steps({"runs": runs})
    assert not any(ax.get_legend() for ax in fig.axes) and len(fig.legends) == 1
    fig.canvas.draw()
    legend = fig.legends[0].get_window_extent()
    for ax in fig.axes:
        assert not legend.overlaps(ax.get_window_extent())


def test_projection_costs_values_are_read_off_labelled_ticks():
    cost = projection_cost.projection_cost_data(projection_cost.load())
    fig = plots.projection_cost(cost)
    fig.canvas.draw()
    for ax in fig.axes:
        lo, hi = ax.get_ylim()
        shown = [(v, t.get_text()) for v, t in zip(ax.get_yticks(), ax.get_yticklabels()) if lo <= v <= hi]
        decades = np.log10(hi / lo)
        assert len(shown) >= 2 * decades                # 1, 2 and 5 of each decade: 3 a decade
        assert all(text == f"{v:g}" for v, text in shown)   # as plain numbers


def test_round_off_is_drawn_on_its_own_row_and_zeros_as_exact_only_by_the_rules_identity():
    from mlp_ref.plots.axes import ROUNDOFF_ROW, ZERO_FLOOR, exact, placed
    values = [0.0, 1e-17, -3e-16, ROUNDOFF, 2 * ROUNDOFF, 0.5]
    assert placed(values, exact=True).tolist() == [ZERO_FLOOR, ROUNDOFF_ROW, ROUNDOFF_ROW, ROUNDOFF_ROW,
                                                   2 * ROUNDOFF, 0.5]
    assert placed(values, exact=False).tolist()[:2] == [ROUNDOFF_ROW, ROUNDOFF_ROW]
    assert ZERO_FLOOR < ROUNDOFF_ROW < ROUNDOFF
    assert exact("freeze") and not any(exact(r) for r in ("naive", "masked", "project", "span", "penalty"))
