"""The command line: ``python -m mlp_ref COMMAND`` or ``mlp-ref COMMAND``."""
from __future__ import annotations

import argparse
import sys

from . import bench, report
from .figures import FIGURES, write_all
from .measurements import answer_replay, splitting, table
from .resources import PROJECTION_COST_PATH
from .setups import G_QUESTION, N_PROBE, seed_setup
from .tutorial import show_params, show_stages


def cmd_stages(args):
    """Print every forward and backward stage of the seed network for G = [0, -1]."""
    net, X, _ = seed_setup()
    record = net.forward(X)
    back = net.backward(record, G_QUESTION)
    print(f"{net!r}, seed data X {X.shape}, G = {G_QUESTION.tolist()} for every row\n")
    print("Parameters (every number below follows from these and X):")
    show_params(net, precision=args.precision)
    print()
    print("Forward: z_l = a_{l-1} @ W_l + b_l,  a_l = f_l(z_l)")
    show_stages(record.stages, net, precision=args.precision)
    print("\nBackward: dz_l = da_l * f_l'(z_l), dW_l = a_{l-1}.T @ dz_l, "
          "db_l = sum_rows dz_l, da_{l-1} = dz_l @ W_l.T")
    show_stages(back.stages, net, precision=args.precision)
    return 0


def cmd_table(args):
    """The side-by-side table: every rule on both setups, after 1 and after N steps."""
    print("G = [0, -1]: raise out2, hold out1. Each rule from the same start; "
          f"unseen = {N_PROBE} probe inputs from the same cube.\n")
    print(report.format_table(table.question_table(long_steps=args.steps)))
    print()
    print(report.format_capacity(splitting.out2_capacity(steps=args.steps)))
    return 0


def cmd_replay(args):
    """The accepted answer's TensorFlow script, replayed in NumPy."""
    print("The answer's script on the seed setup (3-4-2 sigmoid, 8 samples, lr 0.1): its three\n"
          "train ops in order, then the one it never ran (the mask with all variables).\n")
    print(report.format_replay(answer_replay.replay_answer(), precision=args.precision))
    return 0


def cmd_figures(args):
    """Regenerate every figure into --out (default: figures/)."""
    # "pareto" names pareto.png
    only = [name if name.endswith(".png") else name + ".png" for name in args.only]
    unknown = [name for name, png in zip(args.only, only) if png not in FIGURES]
    if unknown:
        print(f"--only: unknown figures {unknown}; known: {', '.join(FIGURES)}", file=sys.stderr)
        return 2
    try:
        write_all(args.out, names=only or None)
    except OSError as exc:
        print(f"--out: cannot write figures into {args.out!r} ({exc.strerror or exc})",
              file=sys.stderr)
        return 2
    return 0


def cmd_check(args):
    """Grade an exercise of tutorials/exercises (see mlp_ref/grading.py)."""
    from . import grading

    return grading.main(args.file)


def cmd_bench(args):
    """Time a training step, its matmuls, and each fix's cost (see mlp_ref/bench.py)."""
    return bench.main(args)


def _int_list(text):
    """--sizes: at least two positive whole numbers, comma-separated."""
    try:
        sizes = [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated whole numbers, got {text!r}")
    if len(sizes) < 2 or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"expected at least two positive widths, e.g. 784,512,10, "
                                         f"got {text!r}")
    return sizes


def _whole(minimum):
    """An argparse type: a whole number >= minimum."""
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(f"expected a whole number >= {minimum}, got {text!r}")
        return value
    return parse


def _nonnegative_float(text):
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


COMMANDS = {
    "table": (cmd_table, "the question's side-by-side table of every fix (the default)"),
    "replay": (cmd_replay, "replay the accepted answer's TensorFlow script in NumPy"),
    "stages": (cmd_stages, "print every forward and backward stage of the seed network"),
    "figures": (cmd_figures, "regenerate every figure (PNG) into figures/ or --out DIR"),
    "bench": (cmd_bench, "time a training step against its matmuls, and each fix's cost"),
    "check": (cmd_check, "grade your answer to an exercise: check tutorials/exercises/01_....py"),
}


def build_parser():
    parser = argparse.ArgumentParser(
        prog="mlp-ref",
        description="mlp-ref: move output 2 of an MLP while holding output 1 fixed - "
                    "every fix, measured.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    p = sub.add_parser("table", help=COMMANDS["table"][1])
    p.add_argument("--steps", type=_whole(1), default=100, help="steps of the long runs (default 100)")
    p = sub.add_parser("replay", help=COMMANDS["replay"][1])
    p.add_argument("--precision", type=_whole(0), default=4, help="digits printed (default 4)")
    p = sub.add_parser("stages", help=COMMANDS["stages"][1])
    p.add_argument("--precision", type=_whole(0), default=4, help="digits printed (default 4)")
    p = sub.add_parser("figures", help=COMMANDS["figures"][1])
    p.add_argument("--out", default="figures", help="output folder (default: figures)")
    p.add_argument("--only", nargs="+", default=[], metavar="NAME",
                   help="only these figures, e.g. --only pareto (or pareto.png; default: all)")
    p = sub.add_parser("bench", help=COMMANDS["bench"][1])
    p.add_argument("--sizes", type=_int_list, default=[784, 512, 512, 10],
                   help="layer widths (default: 784,512,512,10)")
    p.add_argument("--batch", type=_whole(1), default=256, help="rows of X (default 256)")
    p.add_argument("--repeats", type=_whole(1), default=15, help="timed calls per measurement (default 15)")
    p.add_argument("--dense-repeats", type=_whole(1), default=3,
                   help="timed calls of the dense-Jacobian sweep (default 3)")
    p.add_argument("--dense-limit-gib", type=_nonnegative_float, default=2.0,
                   help="skip the dense Jacobian above this size (default 2 GiB)")
    p.add_argument("--dtype", choices=["float64", "float32", "both"], default="both")
    p.add_argument("--memory-rows", type=_int_list, default=[16, 32, 64, 128, 256, 512, 819],
                   help="memory sizes m of the many-constraints sweep, 5 m constraints each "
                        "(default: 16,32,64,128,256,512,819)")
    p.add_argument("--json", metavar="PATH", nargs="?", const=PROJECTION_COST_PATH,
                   help="also write the results as JSON into PATH (--json alone: the package's "
                        "projection_cost.json, which the figures and the README read)")
    sub.add_parser("check", help=COMMANDS["check"][1]).add_argument("file", help="the exercise file")
    return parser


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help")):
        argv = ["table", *argv]                   # no command: the question's table
    args = build_parser().parse_args(argv)
    return COMMANDS[args.command][0](args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
