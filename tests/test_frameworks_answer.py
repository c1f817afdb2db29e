"""The accepted answer's own TensorFlow 1 script, run, against ``python -m mlp_ref replay``.

tests/fixtures/answer_tf1.py is the answer's mask script under tf.compat.v1 graph mode, adapted
only to start from the project's seed setup in float64 (see its docstring). One graph, built
once. Its hidden, out, loss, loss2 before and after each train op, and the change of out1 that
each op makes, must equal mlp_ref.measurements.answer_replay.replay_answer's (what the replay command prints)
to 1e-12.
"""
import importlib.util
from pathlib import Path

import numpy as np
import pytest
from _extras import require

from mlp_ref.classroom import cli
from mlp_ref.measurements.answer_replay import replay_answer
from mlp_ref.setups import seed_setup

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "answer_tf1.py"


#: every test here runs PyTorch or TensorFlow: the slow run's (.ci/run)
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def both():
    require("tensorflow", "frameworks")
    spec = importlib.util.spec_from_file_location("answer_tf1", FIXTURE)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    net, X, Y = seed_setup()
    states = script.run(*(net.params[k] for k in ("W1", "b1", "W2", "b2")), X, Y, lr=0.1)
    return states, replay_answer()


def test_the_replay_runs_the_scripts_train_ops_in_its_order(both):
    states, rows = both
    assert len(states) == 4
    assert [r["op"] for r in rows[:4]] == ["initial", "train_op2", "train_op12", "train_op_all"]


@pytest.mark.parametrize("i", range(4), ids=["initial", "train_op2", "train_op12", "train_op_all"])
def test_every_printed_value_equals_the_replays(both, i):
    states, rows = both
    for key in ("hidden", "out", "loss", "loss2"):
        tf1, ours = np.asarray(states[i][key]), np.asarray(rows[i][key])
        assert tf1.shape == ours.shape, key
        assert np.max(np.abs(tf1 - ours)) <= 1e-12 * np.max(np.abs(ours)), key


@pytest.mark.parametrize("i", [1, 2, 3], ids=["train_op2", "train_op12", "train_op_all"])
def test_the_change_of_out1_equals_the_replays(both, i):
    states, rows = both
    d_out1 = states[i]["out"][:, 0] - states[i - 1]["out"][:, 0]
    assert np.max(np.abs(d_out1 - rows[i]["d_out1"])) <= 1e-12
    if i == 1:                                    # the mask with var_list = [W2, b2]
        assert np.all(d_out1 == 0.0) and np.all(rows[i]["d_out1"] == 0.0)
    else:
        assert np.max(np.abs(d_out1)) > 0.1


def test_the_replay_command_prints_the_same_run(both, capsys):
    _, rows = both
    cli.main(["replay"])
    printed = capsys.readouterr().out
    assert f"loss = {rows[3]['loss']:.6f}   loss2 = {rows[3]['loss2']:.6f}" in printed
