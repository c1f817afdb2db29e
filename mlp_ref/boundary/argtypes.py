"""argparse types shared by the command lines (``cli`` and ``measurements.continual``): each
refuses a bad value with a message that argparse prefixes with the option's name."""
from __future__ import annotations

import argparse


def whole(minimum, maximum=None):
    """A whole number >= minimum (and <= maximum)."""
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum or (maximum is not None and value > maximum):
            expected = f">= {minimum}" if maximum is None else f"from {minimum} to {maximum}"
            raise argparse.ArgumentTypeError(f"expected a whole number {expected}, got {text!r}")
        return value
    return parse


def _whole_numbers(text):
    """Comma-separated whole numbers, as a list."""
    try:
        return [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated whole numbers, got {text!r}") from None


def sizes_list(text):
    """Layer widths: at least two positive whole numbers, comma-separated."""
    sizes = _whole_numbers(text)
    if len(sizes) < 2 or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"expected at least two positive widths, e.g. 784,512,10, "
                                         f"got {text!r}")
    return sizes


def rows_list(text):
    """One or more distinct positive whole numbers, comma-separated (memory sizes m)."""
    rows = _whole_numbers(text)
    if min(rows) < 1:
        raise argparse.ArgumentTypeError(f"expected positive whole numbers, e.g. 16,32,64, got {text!r}")
    if len(set(rows)) != len(rows):
        raise argparse.ArgumentTypeError(f"expected distinct sizes (each is one point of the growth "
                                         f"fit), got {text!r}")
    return rows


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
