"""The measurements as text, for the command line and the tutorials: one function per table."""
from __future__ import annotations

import textwrap

import numpy as np

from ..measurements.rules import RULES
from ..setups import OUTPUT_INDICES


def _rule_cell(row):
    """The rule's name with its own settings: "penalty lam=0.5"."""
    return " ".join([row["rule"], *(f"{k}={v:g}" for k, v in row["settings"].items())])


def format_table(rows):
    """``table.question_table`` as text: the table, a legend defining its columns, and one line
    per rule on what it guarantees."""
    n = rows[0]["long_steps"]
    group = f"{'out2 gain':>9} {'|dout1|':>10} {'|dout1|':>10}"           # 99 columns in all
    under = f"{'':9} {'batch':>10} {'unseen':>10}"
    head = f"{'setup':8} {'rule':16} {'lr':>5} | {group} | {group}"
    lines = [f"{'':31} | {'after 1 step':^31} | {f'after {n} steps':^31}", head,
             f"{'':31} | {under} | {under}", "-" * len(head)]
    for r in rows:
        lines.append(f"{r['setup']:8} {_rule_cell(r):16} {r['lr']:>5g} | {r['gain_1']:9.4g} "
                     f"{r['drift_batch_1']:10.3e} {r['drift_unseen_1']:10.3e} | {r['gain_n']:9.4g} "
                     f"{r['drift_batch_n']:10.3e} {r['drift_unseen_n']:10.3e}")
    lines += ["", "Columns (each after 1 step and after the last, measured from the start):",
              "  lr              the step size of every step",
              "  out2 gain       mean over the batch of (out2 - out2 at the start): what G asks to raise",
              "  |dout1| batch   max over the batch of |out1 - out1 at the start|: what should stay 0",
              f"  |dout1| unseen  the same max over {rows[0]['n_probe']} unseen inputs, none of them "
              "in the batch"]
    lams = sorted({r["settings"]["lam"] for r in rows if "lam" in r["settings"]})
    if lams:
        label = "lam=" + ", ".join(f"{v:g}" for v in lams)
        lines.append(f"  {label:15} the penalty's weight: it adds to the loss")
        lines.append(f"  {'':15} lam/2 ||out1 - out1 at the start||^2 on the batch")
    lines.append(f"  {OUTPUT_INDICES}")
    lines.append("")
    lines.append("What each rule guarantees for out1:")
    for rule in dict.fromkeys(r["rule"] for r in rows):
        lines.append(f"  {rule:16} {RULES[rule].guarantee if rule in RULES else ''}")
    return "\n".join(lines)


def format_capacity(res):
    """``splitting.out2_capacity`` as text: what out2 can still learn under each kind of splitting."""
    steps = len(res["steps"]) - 1
    lines = [f"Teaching out2 a new function ({res['target']}) on {res['n']} inputs, {steps} steps, "
             f"each way of holding out1",
             "(and naive, unconstrained, beside them); max |dout1| after the last step:",
             f"{'variant':16} {'out2 MSE':>9} -> {'final':>9} {'max |dout1| batch':>18} "
             f"{'max |dout1| unseen':>19} {'params moved':>13}"]
    for name in ("naive", "freeze", "heads", "towers", "project+restore"):
        r = res[name]
        lines.append(f"{name:16} {r['mse'][0]:9.4f} -> {r['mse'][-1]:9.4f} {r['drift_batch']:18.3e} "
                     f"{r['drift_unseen']:19.3e} {r['n_moved']:>6} of {r['n_params']:<4}")
    return "\n".join(lines)


def _state_name(op):
    return "the initial state" if op == "initial" else f"the state after {op}"


#: What the replay shows, in one paragraph (tutorial 03 prints it once, under the replay).
VERDICT = ("Verdict: the mask alone does not hold out1, nor does var_list alone. train_op2 keeps it "
           "fixed because var_list = [W2, b2] freezes the shared layer W1, b1 and the mask zeroes "
           "out1's column of G, so out1's own weights get no gradient; train_op12 (the same "
           "var_list, no mask) and the masked loss on all variables both move out1.")


def format_replay(rows, precision=4, verdict=True):
    """``answer_replay.replay_answer`` as the script prints it (hidden, out, loss, loss2), plus
    out1's change, each row measured the same two ways: made by the op alone (from the state it
    ran from), and since the initial state; then the :data:`VERDICT` unless ``verdict`` is False
    (tutorial 03 says it in its own words, in its next section)."""
    lines = [f"{OUTPUT_INDICES}:", "out1 is the first column of out below.",
             "Each op runs on the state the op before it left (the unrun op: on the initial state);",
             "out1's change is measured from that state (made by this op) and from the initial state.",
             ""]
    with np.printoptions(precision=precision, suppress=True, linewidth=100):
        for r in rows:
            if r["op"] == "initial":
                title = "initial state"
            else:
                vl = f"var_list={r['var_list']}" if r["var_list"] else "all variables"
                title = f"after {r['op']}: minimize {r['loss_name']}, {vl}, run from {_state_name(r['after'])}"
            lines += [f"== {title}", f"hidden =\n{r['hidden']}", f"out =\n{r['out']}",
                      f"loss = {r['loss']:.6f}   loss2 = {r['loss2']:.6f}"]
            if r["op"] != "initial":
                d = np.max(np.abs(r["d_out1"]))
                verdict = "out1 unchanged, bit for bit" if d == 0.0 else "out1 MOVED"
                by_op = f"max |change of out1| made by this op (from {_state_name(r['after'])})"
                since = "max |change of out1| since the initial state"
                width = max(len(by_op), len(since))
                lines.append(f"{by_op:{width}} = {d:.3e}")
                lines.append(f"{since:{width}} = {np.max(np.abs(r['d_out1_start'])):.3e}")
                lines.append(f"  -> {verdict}")
            lines.append("")
    if verdict:
        lines += textwrap.wrap(VERDICT, width=100)
    return "\n".join(lines)


def format_guarantees(measured):
    """``table.measured_guarantees`` as a table: one row per rule, batch and unseen per setup."""
    setups = list(dict.fromkeys(s for s, _ in measured))
    rules = list(dict.fromkeys(r for _, r in measured))

    def cell(label, slope):
        return label if slope is None else f"{label} ({slope:.2f})"

    head = f"{'rule':16}" + "".join(f" | {s + ' batch':>18} {s + ' unseen':>18}" for s in setups)
    lines = [head, "-" * len(head)]
    for rule in rules:
        lines.append(f"{rule:16}" + "".join(
            f" | {cell(*measured[(s, rule)]['batch']):>18} {cell(*measured[(s, rule)]['unseen']):>18}"
            for s in setups))
    return "\n".join(lines)


def format_continual(result):
    """``continual.run``'s result as text, one line per run: old and new test accuracy, drift
    off the memory, time and memory."""
    lines = [f"{'fix':16} {'m':>4}  {'old acc':>7}  {'new acc':>7}  {'max|d out0-4|':>13}  "
             f"{'mean':>7}  {'on memory':>9}  {'ms/step':>8}  {'peak MiB':>8}"]
    for r in result["runs"]:
        mem = "" if np.isnan(r["memory_drift"]) else f"{r['memory_drift']:.1e}"
        lines.append(f"{r['fix']:16} {r['m'] or '':>4}  {r['old_acc'][-1]:7.3f}  "
                     f"{r['new_acc'][-1]:7.3f}  {r['drift_max']:13.3f}  {r['drift_mean']:7.4f}  "
                     f"{mem:>9}  {1e3 * r['seconds_per_step']:8.1f}  "
                     f"{r['peak_bytes'] / 2**20:8.2f}")
    legend = ["old acc, new acc: the fraction of the old (0-4) and the new (5-9) test images read "
              "right after the last step;",
              f"max|d out0-4|, mean: the largest and the mean |change of outputs 0-4| on the "
              f"{result['n_test']['old']} old test images; on memory: the largest on the memory's own images;",
              "ms/step (the mean over every step but the first), peak MiB (tracemalloc's peak above "
              "its start, in the first step): each fix as it runs here, projection and restoring "
              "in the fast tier, the others in the reference (whose gradient keeps every stage): "
              "they compare these implementations, not the rules."]
    lines += [line for item in legend for line in textwrap.wrap(item, width=100)]
    return "\n".join(lines)
