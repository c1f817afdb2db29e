"""Data files that ship inside the package (package data), read through ``importlib.resources``,
so that an installed wheel finds them from any working directory.

    projection_cost.json   the bench run of the project's machine that projection_cost.png
                           and the README's performance numbers are drawn from
                           (``python -m mlp_ref bench --json``, whose default is this file)
    digits.npz             the 8 x 8 handwritten digits (UCI optdigits, CC BY 4.0), read by
                           ``data.digits_arrays``
    continual_cost.json    the cost sweep of holding 5 m constraints that continual_cost.png,
                           tutorial 08 and the README are drawn from
                           (``python -m mlp_ref.measurements.continual --json``)
    README.md              where each file comes from: the digits' source, licence, attribution
"""
from __future__ import annotations

import json
import os
from importlib import resources

PROJECTION_COST = "projection_cost.json"
DIGITS = "digits.npz"
CONTINUAL_COST = "continual_cost.json"

#: Where ``python -m mlp_ref bench --json`` writes by default: this folder in a source checkout.
PROJECTION_COST_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), PROJECTION_COST)
#: Where ``python -m mlp_ref.measurements.continual --json`` writes by default.
CONTINUAL_COST_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), CONTINUAL_COST)


def read_bytes(name):
    """The bytes of the shipped file ``name``."""
    return resources.files(__name__).joinpath(name).read_bytes()


def read_json(name):
    """The JSON document of the shipped file ``name``."""
    return json.loads(read_bytes(name).decode("utf-8"))
