import os

import pytest

os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture(scope="session")
def capacity():
    """``experiments.out2_capacity()`` once for the whole run: the tutorials' tests and the
    experiments' tests check the same 200-step result."""
    from mlp_ref import experiments
    return experiments.out2_capacity()
