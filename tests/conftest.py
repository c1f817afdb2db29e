"""Measurements that several test modules check, each computed once per session.

Each fixture is the measurement a figure, a tutorial or the CLI shows, with the same arguments,
so that a claim is checked on the very numbers that state it; those of the figures are the
figures' own measurements, those the wheel's figures were drawn from when this session draws
them (``_background.figure_data``).
"""
import gc
import os
import sys

# No collection of cycles while the tests are collected: the imports and the collected tests are
# objects that live as long as the session, and each full pass of the collector would walk them
# all (about 1 s of passes). They are frozen out of its passes once collected (below).
gc.disable()

# One BLAS thread in this process, as in the tutorials' processes (_background.tutorial_env): tests
# compare digits at round-off level printed there with digits computed here, and the same seed
# gives the same bits only for the same thread count (README, "Reproducibility"). OpenBLAS reads
# the variables once, when NumPy loads it; they are then put back as they were, so that the bench
# (which reports them) and child processes see the user's own settings.

assert "numpy" not in sys.modules, "conftest: NumPy was loaded before its BLAS threads were set"
_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
_saved = {var: os.environ.get(var) for var in _THREADS}
os.environ.update(dict.fromkeys(_THREADS, "1"))
import numpy  # noqa: E402,F401  (loads the BLAS with one thread)

for _var, _value in _saved.items():
    if _value is None:
        del os.environ[_var]
    else:
        os.environ[_var] = _value

import pytest  # noqa: E402

from mlp_ref.bench import keep_freed_memory  # noqa: E402

# glibc keeps this process's freed memory for its next arrays (as every process the suite starts
# does but the bench's: _background.kept_memory): no freed page is faulted back in one at a time.
keep_freed_memory()

import _background  # noqa: E402

os.environ.setdefault("MPLBACKEND", "Agg")

from mlp_ref.measurements import splitting, table           # noqa: E402
from mlp_ref.setups import seed_setup, visible_setup         # noqa: E402


#: The fixtures that read the background jobs' results (test file, fixture; conftest.py's serve
#: every file), in about the order the jobs finish: the tests that use one run after all the
#: others, so that the jobs have the whole run to finish in, and only those, so that little is
#: left to do once the last job is done (the order of tests is no part of their meaning: each
#: builds or reads what it needs). The figures' measurements are the wheel's
#: (``_background.figure_data``).
READ_THE_BACKGROUND = (("test_figures.py", "runs"),
                       *(("conftest.py", name) for name in ("tangent_kernels", "weight_changes",
                                                            "drift_results", "trajectories",
                                                            "slice_result", "order_result")),
                       ("test_continual.py", "res"),
                       ("test_tutorials.py", "outputs"), ("test_bench.py", "bench_command"),
                       ("test_notebooks.py", "notebooks"))


def pytest_collection_modifyitems(session, config, items):
    """Every test that reads no background job first, then those that do, by READ_THE_BACKGROUND."""
    def late(item):
        uses = [i for i, (file, fixture) in enumerate(READ_THE_BACKGROUND, 1)
                if file in (item.path.name, "conftest.py") and fixture in getattr(item, "fixturenames", ())]
        return max(uses, default=0)
    items.sort(key=late)                                    # stable: the rest keep their order


def pytest_sessionstart(session):
    """The whole suite (``pytest`` with no arguments, no -k, -m, --lf or --ignore): every
    background job starts now, while the tests are collected (3 s of one core), not once they are."""
    config = session.config
    whole = (getattr(config, "args_source", None) == pytest.Config.ArgsSource.TESTPATHS
             and not (config.option.keyword or config.option.markexpr or config.option.deselect
                      or getattr(config.option, "lf", False) or config.option.ignore
                      or config.option.ignore_glob))
    if whole:
        _background.start(_background.every_test_file())


def pytest_collection_finish(session):
    """Start the tutorials and the wheel's figures in other processes, if collected tests read them;
    then the garbage collector runs again, without walking what the imports and the collection
    made (``gc.freeze``: it lives as long as the session)."""
    _background.start({item.path.name for item in session.items})
    gc.collect()
    gc.freeze()
    gc.enable()


def pytest_sessionfinish(session, exitstatus):
    _background.stop()


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
    tangent_kernel.png draws them (the figure's own run)."""
    return dict(zip(("seed", "visible"), _background.figure_data("tangent_kernels")))


@pytest.fixture(scope="session")
def weight_changes():
    """``question.weight_changes("seed")``: what one step of each fix moves (network_fixes.png)."""
    return _background.figure_data("seed_weight_changes")


@pytest.fixture(scope="session")
def drift_results():
    """The one-step runs of drift_vs_lr.png, visible setup first."""
    return _background.figure_data("drift_results")


@pytest.fixture(scope="session")
def trajectories():
    """The 200 steps of trajectories.png and pareto.png (the figures' own run)."""
    return _background.figure_data("visible_trajectories")


@pytest.fixture(scope="session")
def slice_result():
    """The slice of input space of heldout_drift.png."""
    return _background.figure_data("heldout_slice")


@pytest.fixture(scope="session")
def order_result():
    """Adam and projection in either order (optimizer_order.png, tutorial 06)."""
    return _background.figure_data("adam_orders")


@pytest.fixture(scope="session")
def guarantees():
    """``table.measured_guarantees()``: the guarantees table of tutorial 06, measured."""
    return table.measured_guarantees()
