"""Optional extras in tests: skipped with a one-line reason on a user's machine, a failure in CI.

    torch = require("torch", "frameworks")

CI (``CI=true``) installs every extra, so there a missing one is a broken install step, not a
reason to skip: the test fails and says which extra to install.
"""
import importlib
import os

import pytest


def in_ci():
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def require(module, extra):
    """``module`` imported, or skip (fail in CI) naming the extra that provides it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        reason = f"needs {module} from the [{extra}] extra: pip install -e '.[{extra}]' ({exc})"
        if in_ci():
            pytest.fail(f"CI=true: {reason}", pytrace=False)
        pytest.skip(reason)
