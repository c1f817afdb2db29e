"""The command line: ``python -m mlp_ref COMMAND`` or ``mlp-ref COMMAND``."""
from __future__ import annotations

import argparse
import sys

import numpy as np


def cmd_stages(args):
    """Print every forward and backward stage of the seed network for G = [0, -1]."""
    from .setups import G_QUESTION, seed_setup

    net, X, _ = seed_setup()
    record = net.forward(X)
    back = net.backward(record, G_QUESTION)
    print(f"{net!r}, seed data X {X.shape}, G = {G_QUESTION.tolist()} for every row\n")
    with np.printoptions(precision=args.precision, suppress=True, linewidth=100):
        print("Forward: z_l = a_{l-1} @ W_l + b_l,  a_l = f_l(z_l)")
        for name, value in record.stages.items():
            _print_stage(name, value, _forward_formula(name, net))
        print("\nBackward: dz_l = da_l * f_l'(z_l), dW_l = a_{l-1}.T @ dz_l, "
              "db_l = sum_rows dz_l, da_{l-1} = dz_l @ W_l.T")
        for name, value in back.stages.items():
            _print_stage(name, value, _backward_formula(name, net))
    return 0


def _forward_formula(name, net):
    l = int(name[1:])
    if name == "a0":
        return "X"
    if name[0] == "z":
        return f"a{l - 1} @ W{l} + b{l}"
    return f"{net.activations[l - 1]}(z{l})"


def _backward_formula(name, net):
    if name == "dout":
        return "G"
    kind, l = name[:2], int(name[2:])
    if kind == "dz":
        act = net.activations[l - 1]
        da = "dout" if l == net.depth else f"da{l}"
        return da if act == "identity" else f"{da} * {act}'(z{l})"
    return {"dW": f"a{l - 1}.T @ dz{l}", "db": f"dz{l}.sum(axis=0)",
            "da": f"dz{l + 1} @ W{l + 1}.T"}[kind]


def _print_stage(name, value, formula):
    print(f"\n{name} = {formula}   shape {value.shape}")
    print("  " + np.array2string(value, prefix="  "))


def cmd_figures(args):
    """Regenerate every figure into --out (default: figures/)."""
    from .figures import write_all

    write_all(args.out)
    return 0


def cmd_bench(args):
    """Time a training step, its matmuls, and each fix's cost (see mlp_ref/bench.py)."""
    from . import bench

    return bench.main(args)


def _int_list(text):
    try:
        return [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated whole numbers, got {text!r}")


COMMANDS = {
    "stages": (cmd_stages, "print every forward and backward stage of the seed network"),
    "figures": (cmd_figures, "regenerate every figure (PNG) into figures/ or --out DIR"),
    "bench": (cmd_bench, "time a training step against its matmuls, and each fix's cost"),
}


def build_parser():
    parser = argparse.ArgumentParser(
        prog="mlp-ref",
        description="mlp-ref: move output 2 of an MLP while holding output 1 fixed - "
                    "every fix, measured.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    p = sub.add_parser("stages", help=COMMANDS["stages"][1])
    p.add_argument("--precision", type=int, default=4, help="digits printed (default 4)")
    p = sub.add_parser("figures", help=COMMANDS["figures"][1])
    p.add_argument("--out", default="figures", help="output folder (default: figures)")
    p = sub.add_parser("bench", help=COMMANDS["bench"][1])
    p.add_argument("--sizes", type=_int_list, default=[784, 512, 512, 10],
                   help="layer widths (default: 784,512,512,10)")
    p.add_argument("--batch", type=int, default=256, help="rows of X (default 256)")
    p.add_argument("--repeats", type=int, default=15, help="timed calls per measurement (default 15)")
    p.add_argument("--dense-repeats", type=int, default=3,
                   help="timed calls of the dense-Jacobian sweep (default 3)")
    p.add_argument("--dense-limit-gib", type=float, default=2.0,
                   help="skip the dense Jacobian above this size (default 2 GiB)")
    p.add_argument("--dtype", choices=["float64", "float32", "both"], default="both")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    return COMMANDS[args.command][0](args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
