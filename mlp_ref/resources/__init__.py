"""Data files that ship inside the package (package data), read through ``importlib.resources``,
so that an installed wheel finds them from any working directory.

    projection_cost.json   the bench run of the project's machine that projection_cost.png
                           and benchmarks/README.md's numbers are drawn from
                           (``python -m mlp_ref bench --json``, whose default is this file)
    digits.npz             the 8 x 8 handwritten digits (UCI optdigits, CC BY 4.0), read by
                           ``data.digits_arrays``
    continual_cost.json    the cost sweep of holding 5 m constraints that continual_cost.png,
                           tutorial 08 and benchmarks/README.md are drawn from
                           (``python -m mlp_ref.measurements.continual --json``)
    field_table.json       the field's table on permuted digits that field_accuracy.png,
                           field_acc_bwt.png and tutorial 09 are drawn from
                           over 5 seeds (``python -m mlp_ref continual-table --seeds 5
                           --json``, ``permuted.load``)
    frameworks/            torch_fixes.py, tf_fixes.py and jax_fixes.py, every fix in PyTorch,
                           TensorFlow 2 and JAX, with their README: files to read and import (tutorial 07), never
                           imported by mlp_ref itself, so that no framework is needed to use it
    explorer/              the explorer's page (``explore --html``): page.html, page.css, page.js
                           (the drawing) and mlp.js, the package's mathematics transcribed into
                           JavaScript; ``classroom.explorable`` puts them and the setups into one file
    README.md              where each file comes from: the digits' source, licence, attribution
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from importlib import resources

PROJECTION_COST = "projection_cost.json"
DIGITS = "digits.npz"
CONTINUAL_COST = "continual_cost.json"

#: Where ``python -m mlp_ref bench --json`` writes by default: this folder in a source checkout.
PROJECTION_COST_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), PROJECTION_COST)
#: Where ``python -m mlp_ref.measurements.continual --json`` writes by default.
CONTINUAL_COST_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), CONTINUAL_COST)


def frameworks_folder():
    """The folder of ``torch_fixes.py``, ``tf_fixes.py`` and ``jax_fixes.py`` (a
    ``pathlib.Path``), wherever the package is installed: put it on ``sys.path`` to import them.
    Reading it imports nothing."""
    return Path(str(resources.files(__name__).joinpath("frameworks")))


def read_bytes(name):
    """The bytes of the shipped file ``name``."""
    return resources.files(__name__).joinpath(name).read_bytes()


def read_json(name):
    """The JSON document of the shipped file ``name``."""
    return json.loads(read_bytes(name).decode("utf-8"))
