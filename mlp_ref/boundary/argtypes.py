"""argparse types shared by the command lines (``cli`` and ``measurements.continual``): each
refuses a bad value with a message that argparse prefixes with the option's name."""
from __future__ import annotations

import argparse


def whole_numbers(expected, fits):
    """Comma-separated whole numbers as a list, when ``fits`` takes it; else "expected ``expected``"."""
    def parse(text):
        try:
            values = [int(v) for v in text.split(",")]
        except ValueError:
            values = None
        if values is None or not fits(values):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return values
    return parse


def whole(minimum, maximum=None):
    """A whole number >= minimum (and <= maximum)."""
    within = f">= {minimum}" if maximum is None else f"from {minimum} to {maximum}"
    parse = whole_numbers(f"a whole number {within}",
                          lambda v: len(v) == 1 and v[0] >= minimum and (maximum is None or v[0] <= maximum))
    return lambda text: parse(text)[0]


#: layer widths: at least two positive whole numbers
sizes_list = whole_numbers("at least two positive widths, e.g. 784,512,10", lambda v: len(v) >= 2 and min(v) >= 1)
#: memory sizes m, each one point of a growth fit: distinct positive whole numbers
rows_list = whole_numbers("distinct sizes, positive whole numbers, e.g. 16,32,64 (each is one point of the growth fit)",
                          lambda v: min(v) >= 1 and len(set(v)) == len(v))


def path(text):
    """A file path that is not empty."""
    if not text:
        raise argparse.ArgumentTypeError("expected a file path, got ''")
    return text


def data_source(text):
    """``continual-table --data``: "digits" (the shipped 8 x 8 digits: None), or "mnist:DIR" (DIR)."""
    kind, sep, folder = text.partition(":")
    if text != "digits" and (kind != "mnist" or not sep or not folder):
        raise argparse.ArgumentTypeError(f"expected digits or mnist:DIR (a folder of MNIST's IDX files), got {text!r}")
    return None if text == "digits" else folder
