"""The explorer (``python -m mlp_ref explore``): its widgets, driven under Agg, draw the
measurement they name; its static page (``--html``), opened in a real headless Chromium, shows
for every control the precomputed state that control names, with no error in the console; the
same command writes the same bytes."""
import os
import shutil

import numpy as np
from matplotlib.collections import LineCollection
import pytest
from _drawn import cut_off_texts
from _extras import in_ci

from mlp_ref.classroom import cli, explorable
from mlp_ref.measurements import explorer as measure
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


# -- the static page --------------------------------------------------------------------------------
#: A grid small enough to draw in a test, with every control: both setups, three fixes (the
#: penalty's lam among them), two values of everything else.
SMALL = {"setup": ("seed", "visible"), "fix": ("naive", "freeze", "penalty"), "lr": (0.01, 0.1),
         "steps": (1, 5), "lam": (0.5, 5.0)}


def test_the_page_names_every_state_of_its_grid_once():
    keys = [k for k, *_ in explorable.grid_states(SMALL)]
    assert len(keys) == len(set(keys)) == 2 * (2 * 2 * 2 + 2 * 2 * 2)
    assert explorable.key("seed", "naive", 1, 0, 1) == "seed|naive|1|0|-"       # lam: penalty only


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
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=412,915"):                 # a phone's screen
        options.add_argument(flag)
    return webdriver, options, Service(driver)


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    path = tmp_path_factory.mktemp("page") / "explorable.html"
    explorable.write_html(path, grid=SMALL)
    return path


@pytest.mark.slow
def test_every_control_shows_its_precomputed_state_in_chromium(page, tmp_path):
    webdriver, options, service = chromium()
    options.add_argument(f"--user-data-dir={tmp_path / 'profile'}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select
    browser = webdriver.Chrome(options=options, service=service)
    try:
        browser.get(page.as_uri())
        shots = os.environ.get("MLP_REF_SHOTS")
        states = browser.execute_script("return STATES")
        assert sorted(states) == sorted(k for k, *_ in explorable.grid_states(SMALL))

        def shown():
            img = browser.find_element(By.ID, "view")
            return (img.get_attribute("data-state"), img.get_attribute("src"),
                    browser.find_element(By.ID, "drift").text, browser.find_element(By.ID, "gain").text)

        def expect(setup, fix, i, s, li):
            """The page shows the state these controls name: its picture and its numbers,
            the numbers measured here afresh."""
            k = explorable.key(setup, fix, i, s, li)
            state = measure.state(setup, fix, SMALL["lr"][i], SMALL["steps"][s],
                                  SMALL["lam"][li] if fix == "penalty" else 0.5)
            numbers = explorable.numbers(state)
            assert shown() == (k, states[k]["img"], numbers["drift"], numbers["gain"])

        def slide(name, index):
            browser.execute_script(
                "const e = document.getElementById(arguments[0]); e.value = arguments[1];"
                "e.dispatchEvent(new Event('input', {bubbles: true}));", name, str(index))

        expect("seed", "naive", 1, 0, 0)               # the page opens on the seed's lr, 0.1
        if shots:
            browser.save_screenshot(os.path.join(shots, "explore_page_phone.png"))
        seen = {shown()[1]}
        browser.find_element(By.CSS_SELECTOR, "input[name=setup][value=visible]").click()
        expect("visible", "naive", 1, 0, 0)
        Select(browser.find_element(By.ID, "fix")).select_by_value("freeze")
        expect("visible", "freeze", 1, 0, 0)
        slide("lr", 0)
        expect("visible", "freeze", 0, 0, 0)
        slide("steps", 1)
        expect("visible", "freeze", 0, 1, 0)
        assert not browser.find_element(By.ID, "lam").is_enabled()     # lam: penalty only
        Select(browser.find_element(By.ID, "fix")).select_by_value("penalty")
        assert browser.find_element(By.ID, "lam").is_enabled()
        expect("visible", "penalty", 0, 1, 0)
        slide("lam", 1)
        expect("visible", "penalty", 0, 1, 1)
        browser.find_element(By.CSS_SELECTOR, "input[name=setup][value=seed]").click()
        expect("seed", "penalty", 0, 1, 1)
        # every control changed the picture: no two of the states visited share one
        for setup, fix, i, s, li in [("visible", "naive", 1, 0, 0), ("visible", "freeze", 1, 0, 0),
                                     ("visible", "freeze", 0, 0, 0), ("visible", "freeze", 0, 1, 0),
                                     ("visible", "penalty", 0, 1, 0), ("visible", "penalty", 0, 1, 1),
                                     ("seed", "penalty", 0, 1, 1)]:
            seen.add(states[explorable.key(setup, fix, i, s, li)]["img"])
        assert len(seen) == 8
        if shots:
            browser.set_window_size(1280, 900)
            browser.save_screenshot(os.path.join(shots, "explore_page_desktop.png"))
        errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
        assert errors == []
    finally:
        browser.quit()


@pytest.mark.slow
def test_the_page_is_self_contained_and_the_same_bytes_twice(page, tmp_path):
    text = page.read_text(encoding="utf-8")
    for outside in ("http://", "https://", "//cdn", "<link", "src=\"http"):
        assert outside not in text
    again = tmp_path / "again.html"
    explorable.write_html(again, grid=SMALL)
    assert again.read_bytes() == page.read_bytes()


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
    from _runs import ROOT
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3")
    client.km = client.kernel_manager_class(kernel_name="python3")
    client.execute(env=env)
    text = "".join(out.get("text", "") for out in nb.cells[1].outputs)
    assert text.split() == ["module://ipympl.backend_nbagg", "Canvas", "('seed',", "'freeze')", "5",
                            repr(measure.state("seed", "freeze", 0.1, 5)["drift_batch"])]
