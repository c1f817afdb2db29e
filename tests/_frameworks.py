"""The framework modules of mlp_ref/resources/frameworks (package data), loaded for the tests (each framework once).

    fx = load("torch")          # mlp_ref/resources/frameworks/torch_fixes.py, or a skip (a failure in CI)

torch_fixes, tf_fixes and jax_fixes define the same functions with the same meaning, so one test
serves the three; what differs (a direction is a dict in PyTorch, a list in TensorFlow, a pytree
in JAX) is hidden behind ``fx.as_mlp_ref``, ``fx.flat`` and ``fx.outputs``.
"""
import gc
import importlib
import textwrap
import sys

import numpy as np
from _extras import require

from mlp_ref.jacobian import flatten
from mlp_ref.resources import frameworks_folder

FRAMEWORKS_DIR = frameworks_folder()

#: framework module -> the file of mlp_ref/resources/frameworks that holds its fixes
MODULES = {"torch": "torch_fixes", "tensorflow": "tf_fixes", "jax": "jax_fixes"}
#: the name tutorial 07 prints for each framework -> its module
NAMES = {"PyTorch": "torch", "TensorFlow 2": "tensorflow", "JAX": "jax"}
#: what else a framework's fixes import (jax_fixes: optax, from the same extra)
ALSO = {"jax": ["optax"]}


def load(framework):
    gc.disable()                         # importing one builds some 350,000 objects that live as
    try:                                 # long as the session: no full pass walks them meanwhile
        module = require(framework, "frameworks")
        for other in ALSO.get(framework, []):
            require(other, "frameworks")
    finally:
        gc.enable()
    if framework == "torch":
        module.set_num_threads(1)        # tiny matrices: a second thread only spins (100x slower)
    if framework == "tensorflow":        # the same for TensorFlow's two thread pools
        try:
            module.config.threading.set_intra_op_parallelism_threads(1)
            module.config.threading.set_inter_op_parallelism_threads(1)
        except RuntimeError:             # settable only before TensorFlow's first op
            pass
    if str(FRAMEWORKS_DIR) not in sys.path:
        sys.path.insert(0, str(FRAMEWORKS_DIR))      # as tutorial 07 does
    fixes = importlib.import_module(MODULES[framework])
    # the framework's modules (some 700,000 objects with both) live as long as the session:
    # moved out of the garbage collector's full passes, which would walk them each time
    gc.freeze()
    return fixes


def rel_error(a, b):
    """max |a - b| / max |b| over two directions (dicts like params, or vectors)."""
    a = flatten(a) if isinstance(a, dict) else np.asarray(a)
    b = flatten(b) if isinstance(b, dict) else np.asarray(b)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def printed_sources(text):
    """The source blocks the tutorial printed: (framework, function) -> source, dedented."""
    blocks, key, lines = {}, None, []
    for line in text.splitlines() + ["<end>"]:
        if key and (line.startswith("    ") or line == ""):
            lines.append(line)
            continue
        if key:
            blocks[key] = textwrap.dedent("\n".join(lines)).strip("\n")
            key = None
        if line.startswith("--- ") and line.endswith(" ---"):
            framework, rest = line[4:-4].split(": ", 1)
            key, lines = (framework, rest.split(", ")[1]), []
    return blocks
