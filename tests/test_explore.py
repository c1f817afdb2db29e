"""The explorer (``python -m mlp_ref explore``): its widgets, driven under Agg, draw the
measurement they name; its page (``--html``) computes the question itself, in JavaScript that
transcribes the package: its ``window.mlpRef.state`` equals ``measurements.explorer.state`` at
random settings (in Node, and in a real headless Chromium), and the page is driven there by its
controls and by the keyboard, in both colour schemes, checked by axe-core, on a phone's screen and
under a phone-class CPU."""
import json
import os
import re
import shutil
import subprocess
import sys
import warnings

import numpy as np
from matplotlib.collections import LineCollection
import pytest
from _drawn import cut_off_texts
from _extras import in_ci
from _runs import ROOT

from mlp_ref import setups
from mlp_ref.classroom import cli, explorable
from mlp_ref.measurements import explorer as measure
from mlp_ref.measurements.fits import ROUNDOFF
from mlp_ref.plots.axes import exact, placed


# -- the live window, under Agg ---------------------------------------------------------------------
def drawn(live):
    """What the panels show: out1's and out2's bars, the drift curve, the ring, the network's
    dotted (unchanged) and solid (moved) edges."""
    ax = live.axes
    curve, ring = ax["drift"].lines[-3:-1]          # the curve, the ring; then the lr's line
    still, moving = [c for c in ax["network"].collections if isinstance(c, LineCollection)]
    return {"out1": np.array([p.get_height() for p in ax["out1"].patches]),
            "out2": np.array([p.get_height() for p in ax["out2"].patches]),
            "curve": curve.get_ydata(), "ring": (ring.get_xdata()[0], ring.get_ydata()[0]),
            "unchanged": len(still.get_segments()) if still.get_linestyle()[0][1] else 0,
            "moved": len(moving.get_segments()) if not moving.get_linestyle()[0][1] else 0}


def check_against_measurement(live):
    setup, fix, lr, steps, lam = live.values()
    state = measure.state(setup, fix, lr, steps, lam)          # measured afresh, not read back
    drift, _ = measure.drift_curve(setup, fix, explorable.LIVE_LRS, steps, lam)
    shown = drawn(live)
    np.testing.assert_array_equal(shown["out1"], state["delta"][:, 0])
    np.testing.assert_array_equal(shown["out2"], state["delta"][:, 1])
    np.testing.assert_array_equal(shown["curve"], placed(drift, exact(fix)))
    assert shown["ring"] == (lr, placed(state["drift_batch"], exact(fix)))
    weights = [state["weights"][f"W{l}"] for l in range(1, len(state["sizes"]))]
    assert shown["unchanged"] == sum(int(np.sum(W == 0.0)) for W in weights)
    assert shown["moved"] == sum(int(np.sum(W != 0.0)) for W in weights)
    return state


@pytest.mark.slow
def test_the_widgets_redraw_the_measurement_they_name():
    live = explorable.explorer()
    assert live.values() == ("seed", "naive", pytest.approx(0.1), 1, pytest.approx(0.5))
    check_against_measurement(live)
    live.fix.set_active(list(measure.FIXES).index("freeze"))      # a click on "freeze"
    state = check_against_measurement(live)          # (every slider: the slow test below)
    # freezing: the hidden layer's 3 x 4 weights are not moved at all, nor out1's 4 own
    # weights (their gradient a1^T G[:, out1] is 0: G's out1 column is 0); out1 by exactly 0.0
    assert drawn(live)["unchanged"] == 12 + 4 and state["drift_batch"] == 0.0
    assert "max |\u0394out1| = 0 exactly" in live.axes["out1"].get_title()


@pytest.mark.slow
def test_every_widget_redraws_and_nothing_is_past_the_edge():
    live = explorable.explorer()
    live.fig.savefig(os.path.join(os.environ.get("MLP_REF_SHOTS", "/tmp"), "explorer_window.png"),
                     dpi=70)
    titles = [live.fig.get_suptitle()]
    for move in (lambda: live.setup.set_active(1), lambda: live.fix.set_active(5),
                 lambda: live.lr.set_val(-2.0), lambda: live.steps.set_val(20),
                 lambda: live.lam.set_val(0.0), lambda: live.fix.set_active(4)):
        move()
        check_against_measurement(live)
        titles.append(live.fig.get_suptitle())
        assert cut_off_texts(live.fig) == [], titles[-1]
    assert len(set(titles)) == len(titles)        # every control changed what is drawn
    assert live.values() == ("visible", "project+restore", pytest.approx(0.01), 20, pytest.approx(1.0))


@pytest.mark.slow
def test_the_window_says_where_the_penalty_diverged_past_its_limit():
    """The visible setup's penalty at lr 0.1, lam 5, 100 steps: the title names the steps taken
    and the step that diverged, the out2 panel says lr lam is past penalty_limit (with its value),
    and the drift axis is labelled above 10^0, up to where the drift went; the "exactly 0" row
    lies below the round-off band, not in it."""
    from mlp_ref import fixes
    from mlp_ref.plots.axes import ZERO_FLOOR
    live = explorable.explorer()
    live.setup.set_active(1)
    live.fix.set_active(list(measure.FIXES).index("penalty"))
    live.lam.set_val(np.log10(5.0))
    live.steps.set_val(100)
    state = check_against_measurement(live)
    assert state["diverged"]
    title = live.fig.get_suptitle()
    assert f"{state['taken']} steps of lr = 0.1" in title and f"diverged at step {state['taken'] + 1}" in title
    net, X, _ = setups.visible_setup()
    notes = " ".join(t.get_text() for t in live.axes["out2"].texts)
    assert "past the penalty's stability limit" in notes and f"{fixes.penalty_limit(net, X):.3g}" in notes
    ax = live.axes["drift"]
    top = max(t for t in ax.get_yticks() if t > 0)
    assert top >= np.sqrt(state["drift_batch"]) > 1.0       # labelled above 10^0, most of the way up
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[:2] == ["0", "round-off"] and len(labels) == len(ax.get_yticks())
    from matplotlib.patches import Polygon
    bottom = min(np.min(p.get_xy()[:, 1]) if isinstance(p, Polygon) else p.get_y() for p in ax.patches)
    assert bottom > ZERO_FLOOR                              # the band (the only patch) starts above it


# -- the page's mathematics against the package ----------------------------------------------------
#: |page - package| <= AGREE * max(|gain|, |drift_batch|) (issue 39), wherever the package's own
#: state is determined to that accuracy (see ``own_spread``).
AGREE = 1e-8
#: Where it is not, the package's own state moves by s (relative) when its start moves by one unit
#: in the last place, or when another of the machines CI runs computes it (.ci/machines.py): the page
#: is one more such machine, held to SPREAD s. At 200 random settings 7 states were such, the page
#: 0.23 s .. 1.0 s from the package (2.1 s once against the one-ulp nudge alone). Two such places:
#: * Gauss-Newton restoring that fails to converge in its 20 iterations (project+restore at lr above
#:   about 0.1) wanders, and on the saturated visible network its Gram holds eigenvalues at the size
#:   of the eigensolver's own error (6 of 8 below rcond = 8 eps of the largest), so which it inverts
#:   is decided by the last bits: at visible, project+restore, lr 0.9033, 125 steps, the gain is
#:   14281.07 here, 13450.64 under OpenBLAS's Prescott kernel, 13980.83 under Haswell's (s = 0.058);
#:   the page's 13813.31 lies among them.
#: * A saturated tanh unit's derivative 1 - a^2 is decided by the last bit of a = tanh(z), which
#:   NumPy's SIMD kernels and its baseline round differently, and a penalty far past its limit
#:   multiplies that by 10^3 a step: at visible, penalty, lr 0.4502, lam 16.15, 23 steps, the drift
#:   is 1.56625836854e64 here and 1.56625839678e64 with NumPy's SIMD cut to its baseline
#:   (s = 1.8e-8), which the page's equals to 4e-15.
SPREAD = 5


def random_settings(n, seed):
    """n settings off any grid: lr log-uniform in 1e-4 .. 1, steps 1 .. 200, lam log-uniform in
    1e-2 .. 1e2 (the page's slider ranges), every setup and fix."""
    rng = np.random.default_rng(seed)
    return [{"setup": str(rng.choice(list(setups.SETUPS))), "fix": str(rng.choice(measure.FIXES)),
             "lr": float(10 ** rng.uniform(-4, 0)), "steps": int(rng.integers(1, 201)),
             "lam": float(10 ** rng.uniform(-2, 2))} for _ in range(n)]


def package_state(settings, nudge=False):
    """``measure.state`` at ``settings``; ``nudge``: from the setup's parameters each moved up by
    one unit in the last place."""
    if not nudge:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")          # PrecisionWarning: the state is compared, not its accuracy
            return measure.state(**settings)
    make = setups.SETUPS[settings["setup"]]

    def nudged():
        net, X, Y = make()
        for v in net.params.values():
            v[...] = np.nextafter(v, np.inf)
        return net, X, Y
    original = measure.SETUPS[settings["setup"]]
    measure.SETUPS[settings["setup"]] = nudged
    try:
        return package_state(settings)
    finally:
        measure.SETUPS[settings["setup"]] = original


def relative(a, b):
    return max(abs(a["gain"] - b["gain"]), abs(a["drift_batch"] - b["drift_batch"])) / \
        max(abs(b["gain"]), abs(b["drift_batch"]))


def machines():
    """The machines CI runs the suite on (.ci/machines.py: NumPy's SIMD cut, OpenBLAS's kernels,
    BLAS threads), as environments."""
    out = subprocess.run([sys.executable, os.path.join(ROOT, ".ci", "machines.py")], capture_output=True,
                         text=True, check=True).stdout
    return [dict(v.split("=", 1) for v in line.split("\t")[1].split()) for line in out.splitlines()]


#: the package's state at each setting of stdin (JSON), printed as JSON: run on another machine
UNDER_KERNEL = """
import json, sys, warnings
from mlp_ref.measurements import explorer
warnings.simplefilter("ignore")
print(json.dumps([{k: s[k] for k in ("gain", "drift_batch")} for s in
                  (explorer.state(**c) for c in json.load(sys.stdin))]))
"""


def own_spread(settings, state):
    """How much the package's own state moves, relative, when its start moves by one ulp, or when
    another of CI's machines computes it: the largest of these."""
    spread = relative(package_state(settings, nudge=True), state)
    for env in machines():
        out = subprocess.run([sys.executable, "-c", UNDER_KERNEL], input=json.dumps([settings]), text=True,
                             capture_output=True, check=True, env=dict(os.environ, PYTHONPATH=str(ROOT), **env))
        spread = max(spread, relative(json.loads(out.stdout)[0], state))
    return spread


def check_agreement(cases, page_states):
    """Every page state against the package's: the same steps taken and ``diverged``; freeze's
    drift 0.0 exactly on both; within AGREE, or SPREAD times the package's own spread where that
    is larger than AGREE. Returns (the largest relative difference among the determined states,
    [(settings, difference, spread)] of the others)."""
    worst, loose = 0.0, []
    for settings, page in zip(cases, page_states):
        ours = package_state(settings)
        assert (page["taken"], page["diverged"]) == (ours["taken"], ours["diverged"]), settings
        if settings["fix"] == "freeze":
            assert page["drift_batch"] == 0.0 == ours["drift_batch"], settings
        difference = relative(page, ours)
        if difference <= AGREE:
            worst = max(worst, difference)
            continue
        spread = own_spread(settings, ours)
        assert spread > AGREE and difference <= SPREAD * spread, (settings, difference, spread)
        loose.append((settings, difference, spread))
    return worst, loose


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    path = tmp_path_factory.mktemp("page") / "explorer.html"
    explorable.write_html(path)
    return path


def scripts(text):
    """The page's mathematics (its script) and its data (JSON)."""
    math = re.search(r'<script id="mlp-ref-math">(.*?)</script>', text, re.S).group(1)
    data = re.search(r'<script id="mlp-ref-data" type="application/json">(.*?)</script>', text, re.S).group(1)
    return math, json.loads(data)


#: Node: the page's script in a fresh vm context (no DOM), its mlpRef.state at every setting of stdin.
NODE = r"""
const vm = require("vm"), fs = require("fs");
const page = fs.readFileSync(process.argv[1], "utf8");
const math = page.match(/<script id="mlp-ref-math">([\s\S]*?)<\/script>/)[1];
const data = JSON.parse(page.match(/<script id="mlp-ref-data" type="application\/json">([\s\S]*?)<\/script>/)[1]);
const context = vm.createContext({});
vm.runInContext(math, context);
const ref = context.mlpMath.explorer(data);
const cases = JSON.parse(fs.readFileSync(0, "utf8"));
console.log(JSON.stringify(cases.map((c) => {
  const s = ref.state(c);
  return { gain: s.gain, drift_batch: s.drift_batch, taken: s.taken, diverged: s.diverged };
})));
"""


def node():
    node = shutil.which("node")
    if node is None:
        reason = "needs Node.js (apt-get install -y nodejs)"
        if in_ci():
            pytest.fail(f"CI=true: {reason}", pytrace=False)
        pytest.skip(reason)
    return node


def in_node(path, cases):
    out = subprocess.run([node(), "-e", NODE, str(path)], input=json.dumps(cases), capture_output=True,
                         text=True, check=True, timeout=600)
    return json.loads(out.stdout)


def test_the_page_embeds_the_setups_bit_for_bit_and_holds_in_node_at_one_step(tmp_path):
    """Fast: the page (no network, no file beside it, at most 600 KB) embeds each setup's
    parameters and batch as the same float64s (Python's repr, read back by JSON), and in Node its
    state after one step of every fix equals the package's within AGREE (freeze: 0.0 exactly)."""
    path = tmp_path / "page.html"
    explorable.write_html(path)
    text = path.read_text(encoding="utf-8")
    assert len(text.encode("utf-8")) <= 600_000
    for outside in ("http://", "https://", "//cdn", "<link", "<img", "src=", "@import", "url("):
        assert outside not in text.replace('xmlns="http://www.w3.org/2000/svg"', ""), outside
    math, data = scripts(text)
    assert data["ranges"]["steps"] == [1, 200]               # the guide's "1 to 200 steps"
    for name, make in setups.SETUPS.items():
        net, X, _ = make()
        embedded = data["setups"][name]
        assert embedded["sizes"] == list(net.sizes) and embedded["acts"] == net.activations
        for l in range(1, len(net.sizes)):
            np.testing.assert_array_equal(np.array(embedded["W"][l - 1]), net.params[f"W{l}"])
            np.testing.assert_array_equal(np.array(embedded["b"][l - 1]), net.params[f"b{l}"])
        np.testing.assert_array_equal(np.array(embedded["X"]), X)
    cases = [{"setup": "seed", "fix": fix, "lr": 0.037, "steps": 1, "lam": 2.5} for fix in measure.FIXES
             if fix != "project+restore"]                    # (its restore: the slow test below)
    worst, loose = check_agreement(cases, in_node(path, cases))
    assert loose == []


@pytest.mark.slow
def test_the_page_computes_what_the_package_does_in_node(page):
    """At 60 random settings off any grid, Node runs the page's own script (read from the page,
    in a vm context): the same steps taken and divergence, freeze's drift exactly 0, and
    |page - package| <= 1e-8 max(|gain|, |drift_batch|) wherever the package's own state is
    determined that well (``check_agreement``)."""
    cases = random_settings(60, seed=39)
    cases += [{"setup": "visible", "fix": "penalty", "lr": 0.1, "steps": 200, "lam": 5.0},   # diverges
              {"setup": "seed", "fix": "freeze", "lr": 0.9, "steps": 200, "lam": 0.5}]
    worst, loose = check_agreement(cases, in_node(page, cases))
    print(f"node: largest relative difference {worst:.2g} over {len(cases) - len(loose)} states; "
          f"{len(loose)} states the package's own start decides only to its spread: {loose}")
    assert len(loose) <= len(cases) // 10          # the exception, not the rule
    assert package_state(cases[-2])["diverged"]


@pytest.mark.slow
def test_the_penalty_past_its_limit_is_a_divergence_not_an_error():
    """The visible setup's penalty at lr 0.1 with lam 5 (lr lam = 0.5, past penalty_limit 0.012)
    overflows: the state stops at the last finite step and says so, where it raised."""
    state = package_state({"setup": "visible", "fix": "penalty", "lr": 0.1, "steps": 200, "lam": 5.0})
    assert state["diverged"] and 20 < state["taken"] < 200
    assert np.all(np.isfinite(state["delta"]))


def chromium():
    """A headless Chromium under selenium, or skip (fail in CI) saying what is missing."""
    try:
        from selenium import webdriver
    except ImportError:
        webdriver = None
    browser, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (webdriver and browser and driver):
        reason = ("needs selenium and Debian's chromium and chromium-driver (pip install selenium; "
                  "apt-get install -y chromium chromium-driver; .ci/run installs them)")
        if in_ci():
            pytest.fail(f"CI=true: {reason}", pytrace=False)
        pytest.skip(reason)
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(driver))


#: Where the test reads axe-core (``npm install --prefix "$HOME/.cache/mlp-ref/npm" axe-core``, as
#: .ci/run does), or $MLP_REF_AXE.
AXE = os.environ.get("MLP_REF_AXE", os.path.expanduser("~/.cache/mlp-ref/npm/node_modules/axe-core/axe.min.js"))


def screen(browser, width, height, scheme="light", mobile=False):
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile})
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia",
                            {"features": [{"name": "prefers-color-scheme", "value": scheme}]})


#: A control set as a user does (the value, then the input event); returns the redraw's ms.
SET = """const [name, value] = arguments; const e = document.querySelector(`[name="${name}"]`);
const t0 = performance.now(); e.value = value; e.dispatchEvent(new Event("input", {bubbles: true}));
document.body.offsetHeight; return performance.now() - t0;"""
SHOWN = """return [document.querySelector('[data-measure="gain"]').textContent,
document.querySelector('[data-measure="drift_batch"]').textContent, document.getElementById("heading").textContent,
document.getElementById("warning").hidden ? "" : document.getElementById("warning").textContent,
document.getElementById("numbers").getAttribute("aria-busy")];"""


def settled(browser):
    """What the page shows once its work is done (numbers no longer busy)."""
    from selenium.webdriver.support.ui import WebDriverWait
    WebDriverWait(browser, 60, 0.05).until(lambda b: b.execute_script(SHOWN)[4] == "false")
    return browser.execute_script(SHOWN)


def read_number(text):
    """A number as the page writes it: +1.534, −2.1×10⁻⁴."""
    sup = str.maketrans("\u207b\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079", "-0123456789")
    text = text.replace("\u2212", "-").replace("+", "")
    if "\u00d7" in text:
        mantissa, power = text.split("\u00d710")
        return float(mantissa) * 10.0 ** int(power.translate(sup))
    return float(text)


@pytest.mark.slow
def test_the_page_in_chromium(page, tmp_path):
    """In a real headless Chromium: mlpRef.state equals the package at random settings; every
    control (named setup, fix, lr, steps, lam, answering the input event) shows the state it names,
    the numbers in data-measure elements; the heading names the steps taken, a divergence where it
    happened and the penalty's stability limit when lr lam is past it; freeze's drift is "0 exactly";
    no error in the console; the same command writes the same bytes."""
    browser = chromium()
    shots = os.environ.get("MLP_REF_SHOTS")
    try:
        screen(browser, 1280, 800)
        browser.get(page.as_uri())
        cases = random_settings(16, seed=3900)
        states = browser.execute_script("return arguments[0].map((c) => { const s = mlpRef.state(c); "
                                        "return {gain: s.gain, drift_batch: s.drift_batch, taken: s.taken, "
                                        "diverged: s.diverged}; })", cases)
        worst, loose = check_agreement(cases, states)
        print(f"chromium: largest relative difference {worst:.2g}; {len(loose)} loose: {loose}")
        assert settled(browser)[2].startswith("1 step of naive at lr = 0.1")     # the seed's lr
        if shots:
            browser.save_screenshot(os.path.join(shots, "explore_page_desktop.png"))

        def expect(settings):
            gain, drift, heading, warning, _ = settled(browser)
            ours = package_state(settings)
            row = browser.execute_script("return document.querySelector('#drift .ring').dataset.row")
            assert read_number(gain) == pytest.approx(ours["gain"], rel=1e-3)
            if settings["fix"] == "freeze":             # an identity: drawn on the "exactly 0" row
                assert drift == "0 exactly" and ours["drift_batch"] == 0.0 and row == "zero"
            elif ours["drift_batch"] <= ROUNDOFF:       # round-off: said so, on the round-off row
                assert drift.startswith("round-off") and row == "roundoff"
            else:
                assert read_number(drift) == pytest.approx(ours["drift_batch"], rel=2e-2) and row == "value"
            assert heading.startswith(f"{ours['taken']} step")
            return ours, heading, warning

        settings = {"setup": "seed", "fix": "naive", "lr": 0.1, "steps": 1, "lam": 0.5}
        rows = set()
        for name, value in [("setup", "visible"), ("fix", "project"), ("lr", 0.0437), ("steps", 7),
                            ("fix", "project+restore"), ("fix", "freeze"), ("fix", "penalty"), ("lam", 0.8)]:
            browser.execute_script(SET, name, str(value))
            settings[name] = value
            expect(settings)
            rows.add(browser.execute_script("return document.querySelector('#drift .ring').dataset.row"))
        assert rows == {"zero", "roundoff", "value"}          # all three kinds of drift were met
        # the penalty past its limit: said, with the limit, and where it diverged
        for name, value in [("lr", 0.1), ("lam", 5), ("steps", 200)]:
            browser.execute_script(SET, name, str(value))
            settings[name] = value
        ours, heading, warning = expect(settings)
        limit = browser.execute_script("return mlpRef.data.setups.visible.penalty_limit")
        assert ours["diverged"] and f"diverged at step {ours['taken'] + 1}" in heading
        assert "stability limit" in warning and f"{limit:.3g}" in warning
        if shots:
            browser.save_screenshot(os.path.join(shots, "explore_page_diverged.png"))
        # project+restore where Gauss-Newton does not converge: said, at the step the package's
        # RestoreReport says so
        from mlp_ref import fixes
        from mlp_ref.measurements import rules
        net, X, _ = setups.visible_setup()
        ref, failed = net(X)[:, 0], None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for k in range(1, 6):
                rules.RULES["project"].step(net, X, setups.G_QUESTION, 0.9033, ref)
                if not fixes.restore(net, X, ref).converged:
                    failed = k
                    break
        assert failed is not None
        for name, value in [("fix", "project+restore"), ("lr", 0.9033), ("steps", 5)]:
            browser.execute_script(SET, name, str(value))
        assert f"did not converge at step {failed} " in settled(browser)[3]
        errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
        assert errors == []
    finally:
        browser.quit()
    again = tmp_path / "again.html"
    explorable.write_html(again)
    assert again.read_bytes() == page.read_bytes()


@pytest.mark.slow
def test_the_page_by_keyboard_on_a_phone_in_both_schemes_with_axe(page):
    """On a 390 x 844 phone the controls, the numbers and the change they make (out1's and out2's
    bars) are on the screen together; Tab reaches every control, whose label names it, and the
    up and down arrows step its value (the numbers follow); axe-core finds no serious or critical
    violation, light or dark; each panel has its table."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys
    if not os.path.exists(AXE):
        reason = f"needs axe-core at {AXE} (npm install --prefix ~/.cache/mlp-ref/npm axe-core; .ci/run does)"
        if in_ci():
            pytest.fail(f"CI=true: {reason}", pytrace=False)
        pytest.skip(reason)
    browser = chromium()
    shots = os.environ.get("MLP_REF_SHOTS")
    try:
        screen(browser, 390, 844, mobile=True)
        browser.get(page.as_uri())
        settled(browser)
        rects = browser.execute_script(
            "return ['#controls', '[data-measure=gain]', '[data-measure=drift_batch]', '#bars'].map("
            "(q) => { const r = document.querySelector(q).getBoundingClientRect(); "
            "return [q, r.top, r.bottom, r.left, r.right]; })")
        for name, top, bottom, left, right in rects:
            assert 0 <= top < bottom <= 844 and 0 <= left < right <= 390, (name, top, bottom, left, right)
        if shots:
            browser.save_screenshot(os.path.join(shots, "explore_page_phone.png"))
        # Tab, from the top of the page, through every control in order
        names = browser.execute_script(
            "return Array.from(document.querySelectorAll('#controls select, #controls input')).map((e) => "
            "[e.id, e.labels.length ? e.labels[0].textContent : e.getAttribute('aria-label')])")
        assert [n for n, _ in names] == ["setup", "fix", "lr", "lr-slider", "steps", "steps-slider", "lam",
                                          "lam-slider"]
        assert all(label.strip() for _, label in names)
        browser.refresh()                                 # focus at the top of a fresh page
        settled(browser)
        reached = []
        for _ in names:
            ActionChains(browser).send_keys(Keys.TAB).perform()
            reached.append(browser.execute_script("return document.activeElement.id"))
        assert reached == [n for n, _ in names]
        # the arrows step each control's value, and the numbers follow
        for control, key, expected in [("steps", Keys.ARROW_UP, "2"), ("lr", Keys.ARROW_UP, "0.126"),
                                       ("lr", Keys.ARROW_DOWN, "0.1"), ("setup", Keys.ARROW_DOWN, "visible"),
                                       ("fix", Keys.ARROW_DOWN, "masked"), ("lam", Keys.ARROW_UP, "0.629"),
                                       ("steps-slider", Keys.ARROW_UP, "3")]:
            before = settled(browser)
            browser.execute_script("document.getElementById(arguments[0]).focus()", control)
            ActionChains(browser).send_keys(key).perform()
            name = control.replace("-slider", "")
            assert browser.execute_script("return document.querySelector(`[name=${arguments[0]}]`).value",
                                          name) == expected
            if name != "lam":                      # lam moves the penalty only: not naive's numbers
                assert settled(browser)[:3] != before[:3], control
        assert browser.execute_script("return document.getElementById('numbers').getAttribute('aria-live')") \
            == "polite"
        for panel in ("bars", "drift", "network"):
            rows = browser.execute_script(f"return document.querySelectorAll('#{panel}-table tbody tr').length")
            assert rows >= 2, panel
        # axe-core, light and dark, on the desktop and the phone
        axe = open(AXE, encoding="utf-8").read()
        for scheme in ("light", "dark"):
            for width, height in ((390, 844), (1280, 800)):
                screen(browser, width, height, scheme, mobile=width < 500)
                browser.refresh()
                settled(browser)
                if shots and scheme == "dark" and width > 500:
                    browser.save_screenshot(os.path.join(shots, "explore_page_dark.png"))
                browser.execute_script(axe)
                found = browser.execute_async_script(
                    "const done = arguments[0]; axe.run(document).then((r) => done(r.violations.map("
                    "(v) => [v.id, v.impact, v.nodes.length])));")
                print(f"axe {scheme} {width}x{height}: {found}")
                assert [v for v in found if v[1] in ("serious", "critical")] == [], (scheme, width, found)
        colour = browser.execute_script("return getComputedStyle(document.body).backgroundColor")
        assert colour == "rgb(18, 18, 18)"                    # the dark scheme was followed
    finally:
        browser.quit()


@pytest.mark.slow
def test_a_control_redraws_in_under_100_ms_on_a_phone_class_cpu(page):
    """Under Chromium's CPU throttling at rate 4 (a phone-class CPU: DevTools' "mid-tier mobile"
    preset), each control change redraws (the state, or as many of its steps as a 12 ms slice
    computes, then every panel) in under 100 ms, the heaviest setting included: the visible
    setup's project+restore at 200 steps, whose rest follows in further slices."""
    browser = chromium()
    try:
        changes = [("setup", "visible"), ("fix", "project+restore"), ("steps", "200"), ("lr", "0.3"),
                   ("lr", "0.05"), ("fix", "naive"), ("steps", "37"), ("fix", "penalty"), ("lam", "5"),
                   ("setup", "seed"), ("fix", "freeze"), ("fix", "project")]
        screen(browser, 1280, 800)
        rounds = []
        # other work on the machine can only add wall-clock time to a redraw, never take it away:
        # each change is timed in up to three rounds from a fresh page, and its fastest is its time
        while len(rounds) < 3 and (not rounds or max(map(min, zip(*rounds))) >= 100):
            browser.execute_cdp_cmd("Emulation.setCPUThrottlingRate", {"rate": 1})
            browser.get(page.as_uri())
            settled(browser)
            from selenium.webdriver.support.ui import WebDriverWait
            WebDriverWait(browser, 60, 0.05).until(lambda b: b.execute_script("return mlpRef.warmed === true"))
            browser.execute_cdp_cmd("Emulation.setCPUThrottlingRate", {"rate": 4})
            rounds.append([browser.execute_script(SET, name, value) for name, value in changes])
            settled(browser)
        times = list(map(min, zip(*rounds)))
        print("redraw ms under 4x throttling:", [[round(t) for t in r] for r in rounds])
        # the page's own budget: a 12 ms slice of computing, then the drawing (about 5 ms, 20 under
        # the throttling): measured 16 .. 42 ms on this 2-core machine at load 5 (a first round
        # under that load reached 183 ms, its second round none above 42)
        assert max(times) < 100
    finally:
        browser.quit()


def test_without_a_window_the_command_says_how_to_get_one(capsys):
    # the tests run under Agg, which opens no window: the command says so instead of drawing
    # into nothing (exit status 2, a usage error)
    assert cli.main(["explore"]) == 2
    assert "--html FILE.html" in capsys.readouterr().err


@pytest.mark.slow
def test_the_same_explorer_runs_in_jupyter_with_ipympl():
    """``%matplotlib widget`` in a real kernel: the window is ipympl's Canvas widget, and its
    widgets redraw the measurement they name."""
    from _extras import require
    require("ipympl", "notebooks")
    nbformat, nbclient = require("nbformat", "notebooks"), require("nbclient", "notebooks")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("%matplotlib widget"),
                nbformat.v4.new_code_cell(
                    "import matplotlib\nfrom mlp_ref.classroom import explorable\nlive = explorable.explorer()\n"
                    "live.fix.set_active(2)\nlive.steps.set_val(5)\n"
                    "print(matplotlib.get_backend(), type(live.fig.canvas).__name__, "
                    "live.values()[:2], int(live.values()[3]), repr(live.state['drift_batch']))")]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3")
    client.km = client.kernel_manager_class(kernel_name="python3")
    client.execute(env=env)
    text = "".join(out.get("text", "") for out in nb.cells[1].outputs)
    assert text.split() == ["module://ipympl.backend_nbagg", "Canvas", "('seed',", "'freeze')", "5",
                            repr(measure.state("seed", "freeze", 0.1, 5)["drift_batch"])]
