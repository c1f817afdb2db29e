"""Exercise 10 (after tutorial 08): a small project: learn a new task, hold out1 on a memory.

Expected time: 90 minutes.

The network must raise out2 on new inputs X (G = [0, -1], the question's) for a number of
steps, while out1 keeps the values it had on a memory of old inputs, to 1e-10. Combine what
exercises 04 and 05 built: a projected step (J1 on the memory), then restoring steps back to
the reference. The grader measures two targets: out1 held on the memory after every step
(max |out1(memory) - ref| <= 1e-10), and out2 on X raised by at least half of what the same
number of naive steps would raise it.

    python -m mlp_ref check tutorials/exercises/10_memory_project.py

Predict, then run: fill in the PREDICT_ constants before you write any code.
"""
import numpy as np

from mlp_ref import jacobian

EXERCISE = "10_memory_project"

#: Held on the memory: is out1 also held (to 1e-6) on new inputs that are not in the memory?
#: True or False.
PREDICT_HELD_OFF_MEMORY = None

#: Out2's gain on X (its mean) with out1 held, as a fraction of the gain of the same number of
#: naive steps (lr 0.01, 20 steps, the grader's setup): a number between 0 and 1, to 0.1.
PREDICT_GAIN_FRACTION = None


def hold_on_memory(net, X, G, memory, steps, lr):
    """Train ``net`` in place along G on X for ``steps`` steps, holding out1 on ``memory``.

    Parameters
    ----------
    net : mlp_ref.MLP                 changed in place
    X : ndarray, shape (n, d)         the new task's inputs
    G : ndarray, shape (K,) or (n, K) dL/dout of the new task ([0, -1]: raise out2)
    memory : ndarray, shape (m, d)    the old inputs on which out1 must keep its values
    steps : int
    lr : float

    Returns
    -------
    list of float, length steps: after each step, max |out1(memory) - ref|, where ref is out1
    on the memory before the first step.
    Each step: D = g - J1^+ J1 g with J1 = jacobian.dense_rows(net, memory, keep=[0]) and
    g = net.gradient(X, G); net.step(D, lr); then restoring steps, theta <- theta - J1^+ r
    with r = out1(memory) - ref, while max |r| > 1e-12 (at most 10).
    """
    raise NotImplementedError
