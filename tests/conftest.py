"""Measurements that several test modules check, each computed once per test process.

Each fixture is the measurement a figure, a tutorial or the CLI shows, with the same arguments,
so that a claim is checked on the very numbers that state it: those of the figures are
``mlp_ref.classroom.figures``' own measurements, as ``python -m mlp_ref figures`` computes them.
"""
import os

import pytest

os.environ.setdefault("MPLBACKEND", "Agg")

from mlp_ref.classroom import figures  # noqa: E402
from mlp_ref.measurements import splitting, table  # noqa: E402
from mlp_ref.setups import seed_setup, visible_setup  # noqa: E402


@pytest.fixture(scope="session")
def setups():
    """{"seed": (net, X, Y), "visible": (net, X, Y)}."""
    return {"seed": seed_setup(), "visible": visible_setup()}


@pytest.fixture(scope="session")
def capacity():
    """``splitting.out2_capacity()``: what out2 can still learn (tutorial 04, ``table`` command)."""
    return splitting.out2_capacity()


@pytest.fixture(scope="session")
def question_table():
    """The question table of tutorial 06, as {(setup, rule): row}."""
    return {(r["setup"], r["rule"]): r for r in table.question_table()}


@pytest.fixture(scope="session")
def tangent_kernels():
    """{"seed": ..., "visible": ...}: ``question.tangent_kernel`` of each setup, as
    tangent_kernel.png draws them (the figure's own measurement)."""
    return dict(zip(("seed", "visible"), figures.tangent_kernels()))


@pytest.fixture(scope="session")
def weight_changes():
    """``question.weight_changes("seed")``: what one step of each fix moves (network_fixes.png)."""
    return figures.seed_weight_changes()


@pytest.fixture(scope="session")
def drift_results():
    """The one-step runs of drift_vs_lr.png, visible setup first."""
    return figures.drift_results()


@pytest.fixture(scope="session")
def trajectories():
    """The 200 steps of trajectories.png and pareto.png (the figures' own run)."""
    return figures.visible_trajectories()


@pytest.fixture(scope="session")
def slice_result():
    """The slice of input space of heldout_drift.png."""
    return figures.heldout_slice()


@pytest.fixture(scope="session")
def order_result():
    """Adam and projection in either order (optimizer_order.png, tutorial 06)."""
    return figures.adam_orders()


@pytest.fixture(scope="session")
def guarantees():
    """``table.measured_guarantees()``: the guarantees table of tutorial 06, measured."""
    return table.measured_guarantees()
