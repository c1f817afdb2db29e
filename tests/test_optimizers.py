"""Projection with Adam: projecting the gradient and letting Adam rescale it drifts O(lr);
projecting Adam's update keeps O(lr^2), drifts less at every step, and out2 rises either way."""
import numpy as np
import pytest

from mlp_ref.measurements import fits, optimizers


@pytest.mark.parametrize("setup", ["seed", "visible"])
def test_project_then_adam_drifts_O_lr_and_the_right_order_O_lr2(setup):
    res = optimizers.optimizer_order(setup, lrs=np.logspace(-5, -3, 5), steps=0)
    wrong, right = (res[name] for name in optimizers.OPTIMIZER_ORDERS)
    assert 0.9 <= wrong["slope"] <= 1.1 and 1.8 <= right["slope"] <= 2.2
    assert wrong["slope"] == fits.loglog_slope(res["lrs"], wrong["one_step"])
    assert np.all(right["one_step"] < wrong["one_step"])


def test_the_optimizer_figure_and_tutorial(order_result):
    r = order_result
    wrong, right = (r[name] for name in optimizers.OPTIMIZER_ORDERS)
    assert abs(wrong["slope"] - 1) < 0.05 and abs(right["slope"] - 2) < 0.05
    assert len(r["steps"]) == 101 and r["lr"] == 1e-3
    assert np.all(right["drift"][1:] < wrong["drift"][1:])                 # at every step
    assert wrong["drift"][-1] > 100 * right["drift"][-1]                   # "more than 100 times"
    assert wrong["gain"][-1] > 0 and right["gain"][-1] > 0                 # "both learn"


def test_a_single_lr_has_no_slope():
    res = optimizers.optimizer_order("seed", lrs=[1e-3], steps=1)
    assert all(res[name]["slope"] is None for name in optimizers.OPTIMIZER_ORDERS)
