"""The command line: ``python -m mlp_ref COMMAND`` or ``mlp-ref COMMAND``."""
from __future__ import annotations

import _thread
import argparse
import contextlib
import errno
import json
import math
import os
import signal
import sys
import threading

from ..boundary import checks
from ..boundary.argtypes import data_source, path, rows_list, sizes_list, whole
from ..fast import bench, threads
from ..files import atomic, idx
from ..measurements import answer_replay, permuted, splitting, table
from ..resources import PROJECTION_COST_PATH
from ..setups import G_QUESTION, N_PROBE, seed_setup
from . import animations, deck, explorable, grading, report
from .figures import FIGURES, FORMATS, write_all
from .grading import gradescope
from .tutorial import show_params, show_stages

#: table --steps at most: 10,000 steps of every rule on both setups take about 3 minutes
MAX_STEPS = 10_000


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
    if args.steps > 100:                          # the default takes a few seconds; say what runs
        print(f"table: {args.steps} steps of every rule on both setups, then out2's capacity ...",
              file=sys.stderr, flush=True)
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
    """Regenerate every figure into --out (default: figures/), as --format (default: png)."""
    # "pareto", "pareto.png" and "pareto.svg" all name the figure registered as pareto.png
    stems, wrong = [], []
    for name in args.only:
        stem, ext = os.path.splitext(name)
        if ext in (".png", ".svg", ".pdf"):
            if ext != "." + args.format and ext != ".png":
                wrong.append(name)
        else:
            stem = name
        stems.append(stem)
    if wrong:
        print(f"--only: {wrong} would be written as .{args.format} files; name them without an "
              f"extension, or pass --format {os.path.splitext(wrong[0])[1][1:]}", file=sys.stderr)
        return 2
    only = list(dict.fromkeys(stem + ".png" for stem in stems))      # each figure once, in order
    unknown = [name for name, stem in zip(args.only, stems) if stem + ".png" not in FIGURES]
    if unknown:
        print(f"--only: unknown figures {unknown}; known: {', '.join(FIGURES)}", file=sys.stderr)
        return 2
    write_all(args.out, names=only or None, fmt=args.format)
    return 0


#: --time-limit's range (seconds per function): below a tenth of a second not even a right answer
#: comes back over the pipe; above a day it is no limit (and the child's CPU limit, a few times
#: it, must stay a whole number the system takes)
TIME_LIMITS = (0.1, 86400.0)


def positive_seconds(text):
    """A number of seconds in TIME_LIMITS (--time-limit)."""
    low, high = TIME_LIMITS
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not low <= value <= high:                 # False for NaN too
        raise argparse.ArgumentTypeError(f"expected seconds from {low:g} to {high:g} (a day), "
                                         f"got {text!r}")
    return value


def points_option(text):
    """--points NAME=N: the points of a function or prediction (any exercise's), or of every
    ``function`` or every ``prediction``; N a number from 0 to 1000."""
    name, _, value = text.partition("=")
    names = {"function", "prediction"} | {item for e in grading.EXERCISES for item in grading.graded(e)}
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if name not in names or not 0 <= number <= 1000:
        raise argparse.ArgumentTypeError(
            f"expected NAME=N, NAME a function or prediction of an exercise (or 'function' or "
            f"'prediction' for every one) and N from 0 to 1000, got {text!r}")
    return name, number


def cmd_animate(args):
    """Write the animations (GIFs) into --out (default: figures/)."""
    animations.write_all(args.out)
    return 0


def cmd_explore(args):
    """The explorer: a window, or with --html a page that computes it (see mlp_ref/classroom/explorable.py)."""
    return explorable.main(args.html, log=lambda line: print(line, file=sys.stderr))


def cmd_slides(args):
    """The deck for the 90-minute class, and its speaker notes (see mlp_ref/classroom/deck.py)."""
    pdf, notes = deck.write(args.out, log=lambda line: print(line, file=sys.stderr))
    print(f"wrote {pdf} and {notes}", file=sys.stderr)
    return 0


def cmd_check(args):
    """Grade exercises of tutorials/exercises, one file or a class (see mlp_ref/classroom/grading/)."""
    try:                                           # every target before the class is graded
        students = grading.gradebook_rows.read_roster(args.roster) if args.roster else None
        grading.check_targets(args.gradebook, args.feedback, args.lms, students)
    except grading.gradebook_rows.RosterProblem as problem:
        print(problem, file=sys.stderr)
        return 2
    return grading.main(args.files, gradebook=args.gradebook, time_limit=args.time_limit,
                        feedback=args.feedback, roster=students, lms=args.lms,
                        points=dict(args.points))


def cmd_gradescope(args):
    """Build Gradescope's autograder zip of one exercise (see mlp_ref/classroom/grading/gradescope.py)."""
    atomic.check_target("--out", args.out)            # before the wheel is built
    try:
        names = gradescope.build(args.exercise, args.out, args.time_limit,
                                 log=lambda line: print(line, file=sys.stderr, flush=True))
    except gradescope.BuildProblem as problem:
        print(f"gradescope: {problem}", file=sys.stderr)
        return 1
    print(f"gradescope: wrote {args.out} ({', '.join(names)}); upload it as the autograder of "
          f"a programming assignment", file=sys.stderr)
    return 0


def cmd_bench(args):
    """Time a training step, its matmuls, and each fix's cost (see mlp_ref/fast/bench.py)."""
    if args.json is not None:
        atomic.check_target("--json", args.json)         # before the minutes of measuring
    return bench.main(args)


#: --dense-limit-gib at most: 2**20 GiB = 2**50 bytes, a pebibyte, far beyond the memory of any
#: one machine (the largest hold tens of TiB), so a larger limit can only be a slip of the
#: exponent; and 2**50 bytes is an exact float and an int that JSON and the reports print as is
MAX_DENSE_LIMIT_GIB = 2 ** 20


def _dense_limit_gib(text):
    """A size in GiB, above 0 and at most MAX_DENSE_LIMIT_GIB: the dense Jacobian is skipped
    above it (inf would be no limit and no size; 1e300 GiB overflows as bytes)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value <= MAX_DENSE_LIMIT_GIB:         # False for NaN too
        raise argparse.ArgumentTypeError(
            f"expected a size in GiB above 0 and at most {MAX_DENSE_LIMIT_GIB} (2**50 bytes, more "
            f"memory than any machine has), got {text!r}")
    return value


def check_bench_args(args):
    """The bench options that name sizes, checked against each other and this machine
    before any work: a message naming the option, never a MemoryError or a lost result at the end.

    Returns None, or the message (starting with the option's name) of the first problem.
    """
    memory = checks.machine_memory()
    # float64 bytes of the parameters, their gradient, direction and copies (4 P), the forward
    # and backward stages of a batch (4 batch x sum of widths) and a batch x batch Gram (2 x)
    P = sum((a + 1) * b for a, b in zip(args.sizes, args.sizes[1:]))
    need = 8 * (4 * P + 4 * args.batch * sum(args.sizes) + 2 * args.batch ** 2)
    if memory is not None and need > memory:
        return (f"--sizes: widths {args.sizes} with --batch {args.batch} need about {checks.gib(need)} "
                f"({P} parameters), more than this machine's memory ({checks.gib(memory)})")
    if args.memory_rows:
        m = max(args.memory_rows)
        constraints = 5 * m                      # bench.MEMORY_KEEP: five outputs held per row
        need = 8 * 4 * constraints ** 2          # the Gram, its factor, its inverse, a product
        if memory is not None and need > memory:
            return (f"--memory-rows: m = {m} holds {constraints} constraints, whose Gram alone "
                    f"needs about {checks.gib(need)}, more than this machine's memory ({checks.gib(memory)})")
    return None


def cmd_continual_table(args):
    """The field's table: permuted digits (or the user's MNIST), every method's R, ACC, BWT, F and
    FWT, over --seeds seeds (measurements/permuted.py)."""
    if args.json is not None:
        atomic.check_target("--json", args.json)      # before the run, not after a minute of it
    images = None
    if args.data is not None:                     # the user's MNIST, read before any run
        try:
            images = permuted.mnist(args.data)
        except idx.IDXError as exc:
            print(f"mlp-ref continual-table: error: --data: {exc}", file=sys.stderr)
            return 2

    def log(line):
        print(f"\r{line}   ", end="", file=sys.stderr, flush=True)

    # peak memory is traced (a quarter more time) for the JSON and for several seeds, not for the
    # default's quick look
    memory = args.json is not None or args.seeds > 1
    try:
        if images is None:
            result = permuted.run(log=log, seeds=args.seeds, tasks=args.tasks or permuted.TASKS, memory=memory)
        else:
            result = permuted.mnist_run(args.data, seeds=args.seeds, tasks=args.tasks, log=log, images=images,
                                        memory=memory)
    finally:
        print(file=sys.stderr)                    # ends the progress line, also on Ctrl-C
    failed = args.json and atomic.write_results(args.json, json.dumps(permuted.as_json(result), indent=1) + "\n")
    print(permuted.format_table(result))
    if failed:
        print(failed, file=sys.stderr)
        return 1
    return 0


COMMANDS = {
    "table": (cmd_table, "the question's side-by-side table of every fix (the default)"),
    "replay": (cmd_replay, "replay the accepted answer's TensorFlow script in NumPy"),
    "stages": (cmd_stages, "print every forward and backward stage of the seed network"),
    "figures": (cmd_figures, "regenerate every figure into figures/ or --out DIR (PNG; --format svg or pdf)"),
    "bench": (cmd_bench, "time a training step against its matmuls, and each fix's cost"),
    "animate": (cmd_animate, "write the animations (GIFs: backprop, projection, continual) into figures/ or --out DIR"),
    "explore": (cmd_explore, "the question, explorable: a window (or --html FILE.html, a page that computes it live)"),
    "slides": (cmd_slides, "the deck for the 90-minute class as a PDF (--out FILE.pdf), speaker notes beside it"),
    "check": (cmd_check, "grade your answer to an exercise: check tutorials/exercises/01_....py"),
    "gradescope": (cmd_gradescope, "build Gradescope's autograder zip for one exercise: gradescope 07_gram_trick"),
    "continual-table": (cmd_continual_table, "the field's table: EWC, A-GEM, GPM, projection on permuted digits"),
}


def build_parser():
    parser = argparse.ArgumentParser(
        prog="mlp-ref",
        description="mlp-ref: move output 2 of an MLP while holding output 1 fixed - "
                    "every fix, measured.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    p = sub.add_parser("table", help=COMMANDS["table"][1])
    p.add_argument("--steps", type=whole(1, MAX_STEPS), default=100,
                   help=f"steps of the long runs (default 100, at most {MAX_STEPS})")
    p = sub.add_parser("replay", help=COMMANDS["replay"][1])
    p.add_argument("--precision", type=whole(0, 17), default=4, help="digits printed (default 4, at most 17)")
    p = sub.add_parser("stages", help=COMMANDS["stages"][1])
    p.add_argument("--precision", type=whole(0, 17), default=4, help="digits printed (default 4, at most 17)")
    p = sub.add_parser("figures", help=COMMANDS["figures"][1])
    p.add_argument("--out", default="figures", help="output folder (default: figures)")
    p.add_argument("--only", nargs="+", action="extend", default=[], metavar="NAME",
                   help="only these figures, e.g. --only pareto (or pareto.png; default: all)")
    p.add_argument("--format", choices=FORMATS, default="png",
                   help="file format: png (the README's), svg or pdf (vector, for slides)")
    p = sub.add_parser("bench", help=COMMANDS["bench"][1])
    p.add_argument("--sizes", type=sizes_list, default=[784, 512, 512, 10],
                   help="layer widths (default: 784,512,512,10)")
    p.add_argument("--batch", type=whole(1), default=256, help="rows of X (default 256)")
    p.add_argument("--repeats", type=whole(1), default=15, help="timed calls per measurement (default 15)")
    p.add_argument("--dense-repeats", type=whole(1), default=3,
                   help="timed calls of the dense-Jacobian sweep (default 3)")
    p.add_argument("--dense-limit-gib", type=_dense_limit_gib, default=2.0,
                   help=f"skip the dense Jacobian above this size (default 2 GiB; above 0, at most "
                        f"{MAX_DENSE_LIMIT_GIB})")
    p.add_argument("--dtype", choices=["float64", "float32", "both"], default="both")
    p.add_argument("--memory-rows", type=rows_list, default=[16, 32, 64, 128, 256, 512, 819],
                   help="memory sizes m of the many-constraints sweep, 5 m constraints each "
                        "(default: 16,32,64,128,256,512,819)")
    p.add_argument("--json", metavar="PATH", nargs="?", const=PROJECTION_COST_PATH, type=path,
                   help="also write the results as JSON into PATH (--json alone: the package's "
                        "projection_cost.json, which the figures and the README read)")
    p = sub.add_parser("animate", help=COMMANDS["animate"][1])
    p.add_argument("--out", default="figures", help="output folder (default: figures)")
    p = sub.add_parser("explore", help=COMMANDS["explore"][1])
    p.add_argument("--html", metavar="FILE.html", type=path, default=None,
                   help="write one self-contained page that computes every state in the browser, instead of a window")
    p = sub.add_parser("slides", help=COMMANDS["slides"][1])
    p.add_argument("--out", metavar="FILE.pdf", type=path, default="mlp-ref-deck.pdf",
                   help="the PDF (default: mlp-ref-deck.pdf); the notes go to FILE.notes.md")
    p = sub.add_parser("check", help=COMMANDS["check"][1])
    p.add_argument("files", type=path, nargs="+", metavar="file",
                   help="exercise files, or folders of them (a class's submissions)")
    p.add_argument("--gradebook", metavar="CSV", type=path,
                   help="write one row per file (and per roster student): score, max_score, a "
                        "column per function and prediction, the reason of a file not graded")
    p.add_argument("--feedback", metavar="DIR", type=path,
                   help="write each submission's report into DIR, named after it (alice_01.md)")
    p.add_argument("--roster", metavar="CSV", type=path,
                   help="the class: columns student,file (a name or a glob), and the LMS's ids")
    p.add_argument("--lms", nargs=2, action="append", default=[], metavar=("SYSTEM", "CSV"),
                   help="also write SYSTEM's import CSV (canvas, moodle or brightspace; needs --roster)")
    p.add_argument("--points", type=points_option, action="append", default=[], metavar="NAME=N",
                   help=f"points of a function or prediction, or of every 'function' (default "
                        f"{grading.answers.FUNCTION_POINTS:g}) or 'prediction' (default "
                        f"{grading.answers.PREDICTION_POINTS:g})")
    p.add_argument("--time-limit", type=positive_seconds, default=grading.TIME_LIMIT, metavar="SECONDS",
                   help=f"seconds each function may run (default {grading.TIME_LIMIT:g}, from "
                        f"{TIME_LIMITS[0]:g} to {TIME_LIMITS[1]:g})")
    p = sub.add_parser("gradescope", help=COMMANDS["gradescope"][1])
    p.add_argument("exercise", choices=list(grading.EXERCISES), metavar="EXERCISE",
                   help=f"the exercise the assignment grades: {', '.join(grading.EXERCISES)}")
    p.add_argument("--out", metavar="ZIP", type=path, default="autograder.zip",
                   help="the zip to upload (default: autograder.zip)")
    p.add_argument("--time-limit", type=positive_seconds, default=grading.TIME_LIMIT, metavar="SECONDS",
                   help=f"seconds each function may run (default {grading.TIME_LIMIT:g})")
    p = sub.add_parser("continual-table", help=COMMANDS["continual-table"][1])
    p.add_argument("--json", metavar="FILE", type=path,
                   help="also write every method's numbers, and each seed's run, as JSON into FILE")
    p.add_argument("--seeds", type=whole(1, 100), default=1, metavar="N",
                   help="runs, seeds 0 .. N-1, each its own split, permutations, init and memory (default 1)")
    p.add_argument("--data", type=data_source, default=None, metavar="mnist:DIR",
                   help="MNIST's four IDX files in DIR (train-images-idx3-ubyte, ..., .gz or not; "
                        "torchvision keeps them in ROOT/MNIST/raw) instead of the shipped digits")
    p.add_argument("--tasks", type=whole(2, 100), default=None, metavar="N",
                   help=f"tasks (default {permuted.TASKS} on the digits, {permuted.MNIST['tasks']} on MNIST)")
    return parser


def main(argv=None):
    """The command line: ``argv`` (default: this process's own arguments, ``sys.argv[1:]``)."""
    started_here = argv is None
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help")):
        argv = ["table", *argv]                   # no command: the question's table
    parser = build_parser()
    args = parser.parse_args(argv)
    problem = check_bench_args(args) if args.command == "bench" else None
    if problem:
        parser.error(problem)                     # usage and the message, exit status 2
    if args.command != "bench":                   # the classroom's small networks: one BLAS thread
        threads.one_blas_thread(sys.orig_argv if started_here else None)
    try:
        with _ctrl_c_never_lost():
            status = COMMANDS[args.command][0](args)
        sys.stdout.flush()
        return status
    except KeyboardInterrupt:
        # every file is written whole or not at all (files/atomic.py): what was there is intact
        print(f"{args.command}: interrupted (Ctrl-C); no file is left half-written", file=sys.stderr)
        return 130
    except BrokenPipeError:                       # `mlp-ref stages | head`: the reader has gone
        _drop_stdout()
        return 1
    except OSError as exc:
        if getattr(exc, "argument", None) is not None:
            # a file option's target: refused at the door (a usage error, 2), or the machine
            # failed to write it (a full disk, 1); the message starts with the option's name
            print(exc if exc.argument.startswith("-") else f"--{exc}", file=sys.stderr)
            return 1 if isinstance(exc, atomic.WriteError) else 2
        if exc.errno == errno.ENOSPC:             # `> /dev/full`: stdout itself cannot be written
            print(f"{args.command}: cannot write the output ({exc.strerror})", file=sys.stderr)
            _drop_stdout()
            return 1
        raise


@contextlib.contextmanager
def _ctrl_c_never_lost():
    """While the block runs, a Ctrl-C that lands in a finalizer (a ``__del__``, a weakref callback
    of the garbage collector, as matplotlib's figures have) still stops the command. Python reports
    a KeyboardInterrupt raised there as "Exception ignored in ..." and goes on: the command would
    finish its work and exit 0. So the interrupt is sent again, by a helper thread, once the
    finalizer has returned (sent from within it, it would be handled and ignored there again);
    should it land in another finalizer, the same happens again. If the work ends first, the
    block raises KeyboardInterrupt itself."""
    default, resent = sys.unraisablehook, []

    def send_again():
        if hasattr(signal, "pthread_kill"):       # a signal wakes a main thread that waits
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        else:
            _thread.interrupt_main()

    def hook(unraisable):
        if issubclass(unraisable.exc_type, KeyboardInterrupt):
            resent.append(threading.Timer(0.001, send_again))
            resent[-1].start()
        else:
            default(unraisable)

    sys.unraisablehook = hook
    try:
        yield
    finally:
        sys.unraisablehook = default
        for timer in resent:                      # none may interrupt what follows the command
            timer.cancel()
            timer.join()
    if resent:
        raise KeyboardInterrupt


def _drop_stdout():
    """Point standard output at the null device, so that what is left in its buffer meets no
    second error when Python flushes it at exit (a traceback-like message and status 120)."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):                 # a stdout with no file behind it
        pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
