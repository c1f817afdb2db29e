"""mlp-ref: a pure-NumPy teaching reference for one question and all of its answers.

    An MLP has two outputs; the loss gradient with respect to the outputs is G = [0, -1].
    A gradient step raises output 2, but output 1 moves too. How do we hold output 1 fixed?

The folders show the house, lowest first; a module imports only from its own room or a lower
one (``tests/test_layout.py`` reads the rooms from these folders and checks every import):

    mlp_ref/*.py    the lesson: activations -> network (MLP) -> jacobian, pseudoinverse -> fixes,
                    baselines -> optim, with architectures, losses, data, setups, gradcheck;
                    beside it boundary/ (what the lesson refuses: checks, diagnosis), files/
                    (atomic writes, saving) and resources/ (the shipped data)
    fast/           the fast tier, its bench, the BLAS thread count
    measurements/   plain arrays, one module per topic
    plots/          matplotlib, one function per figure
    classroom/      the command line, figures, tutorials' runner, animations, explorer, slides,
                    the grader

in two tiers: ``network``, ``jacobian`` and ``fixes`` are the reference, the lesson, written as
the formulas; ``fast`` has the same gradient, step, projection and restore with every trick for
speed and memory, tested equal to the reference, and is what ``python -m mlp_ref bench`` measures.

``import mlp_ref`` stays light: it never imports matplotlib (only ``mlp_ref.plots`` does).
"""
import os as _os
import sys as _sys

if _sys.argv[:1] == ["-m"] and not getattr(_sys.flags, "safe_path", False):
    # `python -m mlp_ref ...` (argv[0] is "-m" while Python finds the package to run) put the
    # current folder first on the import path: run in a class folder, a student's numpy.py
    # would be imported as NumPy by the grader. The package is found already; nothing of ours
    # is imported from the current folder (`python -P` semantics).
    if _sys.path and _sys.path[0] in ("", _os.getcwd()):
        del _sys.path[0]

from . import (activations, architectures, data, fast, fixes, gradcheck, jacobian, losses, optim,
               pseudoinverse, setups)
from .architectures import SplitHeads, TwoTower
from .network import MLP, Backward, Forward

__all__ = ["MLP", "Forward", "Backward", "SplitHeads", "TwoTower", "activations", "architectures",
           "data", "fast", "fixes", "gradcheck", "jacobian", "losses", "optim", "pseudoinverse",
           "setups"]
__version__ = "0.1.0"
