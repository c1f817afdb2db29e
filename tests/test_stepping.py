"""Stepping through the lesson in a debugger meets the chain rule, not the guard rails.

A debugger's ``s`` stops at every line Python runs: ``sys.settrace`` counts the same "line"
events. On the seed network (3-4-2 sigmoid, the answer's 8 samples, G = [0, -1]) a class
stepping into ``net.forward`` walks at most 50 lines, into ``net.backward`` at most 150, and the
first call is as short as the second (nothing is imported lazily on the way). ``s`` on the
``dz`` line of backward's loop lands in the activation's derivative.
"""
import inspect
import subprocess
import sys
from pathlib import Path

import numpy as np
from numpy.lib import NumpyVersion

from mlp_ref import activations, fixes
from mlp_ref.setups import G_QUESTION, seed_setup

from _runs import ROOT


NUMPY = str(Path(np.__file__).parent)
#: NumPy 1.x's errstate is Python (seterr, geterr: some 30 lines a use); NumPy 2's is C
NUMPY_2 = NumpyVersion(np.__version__) >= "2.0.0"


def events(call):
    """(the number of "line" events while ``call()`` runs, those outside NumPy's own files)."""
    lines = [0, 0]

    def tracer(frame, event, arg):
        if event == "line":
            lines[0] += 1
            lines[1] += not frame.f_code.co_filename.startswith(NUMPY)
        return tracer

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        call()
    finally:
        sys.settrace(previous)
    return lines


def test_forward_and_backward_are_short_to_step_through():
    net, X, _ = seed_setup()
    record = net.forward(X)
    net.backward(record, G_QUESTION)
    for call, most in ((lambda: net.forward(X), 50), (lambda: net.backward(record, G_QUESTION), 150)):
        every, ours = events(call)
        assert ours <= most and (every <= most or not NUMPY_2), (every, ours)


def test_project_is_short_to_step_through():
    net, X, _ = seed_setup()
    fixes.project(net, X, G_QUESTION)
    every, ours = events(lambda: fixes.project(net, X, G_QUESTION))
    assert ours <= 1000 and (every <= 1000 or not NUMPY_2), (every, ours)


def test_s_on_the_dz_line_lands_in_the_activations_derivative():
    """The first function called from the ``dz`` line is the derivative of that layer's
    activation (identity at the output, then sigmoid), not NumPy's machinery."""
    from mlp_ref import network
    net, X, _ = seed_setup()
    record = net.forward(X)
    source = inspect.unwrap(network.MLP.backward)            # the body, under its errstate
    lines, first = inspect.getsourcelines(source)
    dz_line = next(first + i for i, text in enumerate(lines) if text.lstrip().startswith("dz = "))
    landed = []

    def tracer(frame, event, arg):
        if event == "line" and frame.f_code is source.__code__ and frame.f_lineno == dz_line:
            landed.append(None)                          # the next call is the one to record
        elif event == "call" and landed and landed[-1] is None:
            landed[-1] = frame.f_code.co_name
        return tracer

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        net.backward(record, G_QUESTION)
    finally:
        sys.settrace(previous)
    assert landed == [activations.identity_grad.__name__, activations.sigmoid_grad.__name__]


def test_the_first_step_into_backward_is_as_short_as_the_second():
    """In a fresh process: no import happens inside the first forward or backward."""
    script = """
import sys
import mlp_ref
from mlp_ref.setups import G_QUESTION, seed_setup
net, X, _ = seed_setup()
counts = []
def tracer(frame, event, arg):
    if event == "line":
        counts[-1] += 1
    return tracer
for _ in range(2):
    for call in (lambda: net.forward(X), lambda: net.backward(net.forward(X), G_QUESTION)):
        counts.append(0)
        sys.settrace(tracer)
        call()
        sys.settrace(None)
print(counts)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                         cwd=ROOT).stdout
    first_forward, first_both, second_forward, second_both = eval(out)
    assert (first_forward, first_both) == (second_forward, second_both)


def test_the_teachers_guide_breaks_on_the_first_line_of_backwards_body():
    """tutorials/README.md's pdb command stops on ``stages = {"dout": ...}``."""
    from mlp_ref import network
    guide = (ROOT / "tutorials" / "README.md").read_text()
    number = int(guide.split('b $PWD/mlp_ref/network.py:', 1)[1].split('"', 1)[0])
    lines = (ROOT / "mlp_ref" / "network.py").read_text().splitlines()
    assert lines[number - 1].lstrip().startswith('stages = {"dout"')
    assert f"Line {number} of `mlp_ref/network.py`" in guide
    assert inspect.getsourcelines(inspect.unwrap(network.MLP.backward))[1] < number
