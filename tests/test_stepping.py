"""Stepping through the lesson in a debugger meets the formulas, not the guard rails.

A debugger's ``s`` stops at every line Python runs: ``sys.settrace`` counts the same "line" events.
On the seed network (3-4-2 sigmoid, the answer's 8 samples, G = [0, -1]), warm (the call made once
before), each call below walks at most its budget of mlp-ref's lines, and a rule spends at least
half of them in the lesson's own files (``LESSON``), not in the checks at the door.

NumPy's own Python lines are not counted: they are NumPy's, ``n`` steps over them, and their number
is NumPy's version's (its ``errstate``, Python in NumPy 1 and again since NumPy 2, is some 15 lines
a ``with`` in 2.4 and 48 in 1.25; ``fixes.project`` walks 592 lines in all with NumPy 2.4, 376 of
them mlp-ref's, as with NumPy 1.25). The call's own line, in this file, is not counted either.
"""
import inspect
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import mlp_ref
from mlp_ref import activations, fixes
from mlp_ref.setups import G_QUESTION, LR, seed_setup

from _runs import ROOT

PACKAGE = Path(mlp_ref.__file__).parent
#: the lesson's own files: where a class stepping through a rule should spend its time
LESSON = {str(PACKAGE / f"{name}.py") for name in (
    "network", "activations", "losses", "jacobian", "pseudoinverse", "fixes", "baselines", "optim", "architectures")}
#: NumPy's folder: its own lines are not the lesson's budget (see the docstring)
NUMPY = str(Path(np.__file__).parent)


def events(call):
    """(mlp-ref's "line" events while ``call()`` runs: every one outside NumPy's files and this one (the
    lambda that makes the call), those in LESSON)."""
    counts = {"ours": 0, "lesson": 0}

    def tracer(frame, event, arg):
        if event == "line" and not frame.f_code.co_filename.startswith(NUMPY) and frame.f_code.co_filename != __file__:
            counts["ours"] += 1
            counts["lesson"] += frame.f_code.co_filename in LESSON
        return tracer

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        call()
    finally:
        sys.settrace(previous)
    return counts["ours"], counts["lesson"]


def seed_calls():
    """The calls stepped through, each made once before (warm), with their budgets: forward and
    backward as tutorial 01 calls them; project; restore after a projected step, as tutorial 05
    calls it; A-GEM on a memory (four rows of the batch) whose gradient conflicts with the batch's."""
    net, X, _ = seed_setup()
    record = net.forward(X)
    D, ref = fixes.project(net, X, G_QUESTION), net(X)[:, 0]
    stepped = [net.copy().step(D, LR["seed"]) for _ in range(6)]     # restore works in place
    memory = (X[:4], -G_QUESTION)
    calls = {"forward": (lambda: net.forward(X), 30),
             "backward": (lambda: net.backward(record, G_QUESTION), 80),
             "project": (lambda: fixes.project(net, X, G_QUESTION), 450),
             "restore": (lambda: fixes.restore(stepped.pop(), X, ref), 900),
             "agem": (lambda: fixes.agem(net, X, G_QUESTION, *memory), 200)}
    for call, _ in calls.values():
        call()
    return calls


CALLS = seed_calls()


@pytest.mark.parametrize("name", list(CALLS))
def test_a_call_is_short_to_step_through(name):
    call, budget = CALLS[name]
    lines, _ = events(call)
    assert lines <= budget, (name, lines)


def test_the_teachers_guide_states_the_counts():
    """The debugger section's counts are these (to 5%: another CPython reports a line once more
    or less around a call it has specialised, as 3.12 does for a property)."""
    guide = " ".join((ROOT / "tutorials" / "README.md").read_text().split())
    stated = re.search(r"stepping into `forward` takes (\d+) lines, `backward` (\d+), `fixes.project` "
                       r"(\d+), `fixes.restore` after a projected step \(as tutorial 05 calls it\) (\d+) "
                       r"and `fixes.agem` (\d+)", guide)
    assert stated, "the guide's counts"
    for name, number in zip(CALLS, stated.groups()):
        measured = events(CALLS[name][0])[0]
        assert abs(int(number) - measured) <= 0.05 * measured, (name, number, measured)


@pytest.mark.parametrize("name", ["project", "restore", "agem"])
def test_a_rule_spends_most_of_its_lines_in_the_lesson(name):
    lines, lesson = events(CALLS[name][0])
    assert lesson >= lines / 2, (name, lesson, lines)


def test_s_on_the_dz_line_lands_in_the_activations_derivative():
    """The first function called from the ``dz`` line is the derivative of that layer's
    activation (identity at the output, then sigmoid), not NumPy's machinery."""
    from mlp_ref import network
    net, X, _ = seed_setup()
    record = net.forward(X)
    source = network.MLP.backward
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


def test_no_rule_is_a_wrapper():
    """``s`` into a rule lands in its own body: every public function of the lesson is the function
    its module defines, not a decorator's wrapper around it."""
    from mlp_ref import baselines, jacobian, network
    for module in (fixes, baselines, jacobian, network):
        for name, value in vars(module).items():
            functions = [value] if inspect.isfunction(value) else [
                v for v in vars(value).values() if inspect.isfunction(v)] if inspect.isclass(value) else []
            for function in functions:
                if function.__module__ == module.__name__ and not function.__name__.startswith("__"):
                    assert not hasattr(function, "__wrapped__"), f"{module.__name__}.{name}"


def test_the_first_step_into_backward_is_as_short_as_the_second():
    """In a fresh process: no import happens inside the first forward or backward, which walk the
    very lines the second ones walk. (Compared as the set of lines, not their count: CPython 3.12
    reports the line a call returns to once more after it has specialised the call, so a warm
    backward counts one event more than a cold one on the same lines.)"""
    script = """
import sys
import mlp_ref
from mlp_ref.setups import G_QUESTION, seed_setup
net, X, _ = seed_setup()
walked = []
def tracer(frame, event, arg):
    if event == "line":
        walked[-1].add((frame.f_code.co_filename, frame.f_lineno))
    return tracer
for _ in range(2):
    for call in (lambda: net.forward(X), lambda: net.backward(net.forward(X), G_QUESTION)):
        walked.append(set())
        sys.settrace(tracer)
        call()
        sys.settrace(None)
print(repr([sorted(w) for w in walked]))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                         cwd=ROOT).stdout
    first_forward, first_both, second_forward, second_both = eval(out)
    assert not [f for f, _ in first_both if "importlib" in f], "an import inside the first call"
    assert (first_forward, first_both) == (second_forward, second_both)


def test_the_teachers_guide_breaks_on_the_first_line_of_backwards_body():
    """tutorials/README.md's pdb command stops on ``stages = {"dout": ...}``, right after the door."""
    from mlp_ref import network
    guide = (ROOT / "tutorials" / "README.md").read_text()
    number = int(guide.split('b $PWD/mlp_ref/network.py:', 1)[1].split('"', 1)[0])
    lines = (ROOT / "mlp_ref" / "network.py").read_text().splitlines()
    assert lines[number - 1].lstrip().startswith('stages = {"dout"')
    assert "checked(" in lines[number - 2]
    assert f"Line {number} of `mlp_ref/network.py`" in guide
    assert inspect.getsourcelines(network.MLP.backward)[1] < number
