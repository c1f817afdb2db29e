"""The log-log slope fit and the order of a drift it reads, on drifts of known order."""
import numpy as np
import pytest

from mlp_ref.measurements import fits


def test_the_slope_of_a_power_law_is_its_exponent():
    lrs = np.logspace(-5, -1, 9)
    assert fits.loglog_slope(lrs, 3 * lrs ** 2) == pytest.approx(2.0, abs=1e-12)
    assert fits.loglog_slope(lrs, 0.5 * lrs + 4 * lrs ** 2, max_lr=1e-4) == pytest.approx(1.0, abs=1e-2)


def test_drift_order_classifies():
    lrs = np.logspace(-5, -3, 5)
    assert fits.drift_order(lrs, np.zeros(5)) == ("exactly 0", None)
    assert fits.drift_order(lrs, [0, 1e-16, 0, 2e-15, 0]) == ("round-off", None)
    label, slope = fits.drift_order(lrs, 3 * lrs ** 2)
    assert label == "O(lr^2)" and slope == pytest.approx(2.0)
    assert fits.drift_order(lrs, 0.5 * lrs)[0] == "O(lr)"


def test_a_slope_needs_two_positive_values():
    lrs = np.logspace(-5, -3, 5)
    with pytest.raises(ValueError, match="^values:"):
        fits.loglog_slope(lrs, [1, 0, 1, 1, 1])
    with pytest.raises(ValueError, match="^values:"):
        fits.loglog_slope(lrs, lrs, max_lr=1e-5)
