"""Run a script as if PyTorch, TensorFlow and JAX were not installed.

    python tests/_hide_frameworks.py SCRIPT [ARGS...]

Importing torch, tensorflow, jax or optax (or any of their submodules) raises ModuleNotFoundError, exactly
as on a machine with only numpy and matplotlib; everything else imports as usual. The tests
run tutorial 07 this way to check that it still runs, and says what it did not run.
"""
import os
import runpy
import sys
from importlib.abc import MetaPathFinder

HIDDEN = ("torch", "tensorflow", "jax", "optax")


class HideFrameworks(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None                                    # not ours: the next finder looks


if __name__ == "__main__":
    sys.meta_path.insert(0, HideFrameworks())
    sys.argv = sys.argv[1:]
    sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))    # as `python SCRIPT` sets it
    runpy.run_path(sys.argv[0], run_name="__main__")
