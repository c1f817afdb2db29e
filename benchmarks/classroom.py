"""What the classroom's commands cost: CPU seconds (user + sys of the process and its children)
and wall seconds of every command and tutorial a class runs, each in a fresh process, with the
BLAS threads it used, against the targets of the issue "Seconds, not minutes".

    python benchmarks/classroom.py                      # this checkout, default environment
    python benchmarks/classroom.py --threads 2          # the user sets OPENBLAS_NUM_THREADS=2
    python benchmarks/classroom.py --repo OTHER_CHECKOUT --label before
    python benchmarks/classroom.py --only figures 09    # some rows
    python benchmarks/classroom.py --json benchmarks/classroom.json   # the committed run

``benchmarks/classroom.json`` is this project's run, on its 2-core machine: the times that
README.md and the teacher's guide state are read from it, and tests/test_tutorials.py checks that
they are its numbers.

Each row runs once (these are seconds, not microseconds: the spread between runs on a quiet
machine is a few percent, on a busy one much more; the CPU seconds vary less than the wall
seconds, since a waiting process pays no CPU, but a BLAS thread spinning for work does). Writes
into a temporary folder; the checkout is left as it was. Not a test: the tests never time.
"""
import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

#: (name, command line after the Python executable, target CPU seconds); OUT is the temporary folder.
ROWS = [
    ("figures", ["-m", "mlp_ref", "figures", "--out", "OUT/figures"], 15),
    *[(f"tutorial {n:02d}", [f"tutorials/{p}"], 40 if n == 7 else 10) for n, p in enumerate([
        "01_forward_backward.py", "02_the_question.py", "03_masking.py", "04_layer_splitting.py",
        "05_projection.py", "06_side_by_side.py", "07_from_numpy_to_frameworks.py",
        "08_a_real_task.py", "09_the_field.py"], 1)],
    ("continual-table", ["-m", "mlp_ref", "continual-table", "--json", "OUT/table.json"], 20),
    ("explore --html", ["-m", "mlp_ref", "explore", "--html", "OUT/explorer.html"], 10),
    ("animate", ["-m", "mlp_ref", "animate", "--out", "OUT/animations"], 15),
    ("slides", ["-m", "mlp_ref", "slides", "--out", "OUT/deck.pdf"], 15),
    ("python -m pytest", ["-m", "pytest", "-q", "-p", "no:cacheprovider"], 30),
]
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                    "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")


def measure(args, cwd, env):
    """(CPU seconds of the child and its children, wall seconds, exit status, last stderr line)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True,
                         stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    tail = (res.stderr.strip().splitlines() or [""])[-1][:80]
    return cpu, wall, res.returncode, tail


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=HERE, help="the checkout to measure (default: this one)")
    parser.add_argument("--threads", type=int, help="set OPENBLAS_NUM_THREADS and its kin to this")
    parser.add_argument("--label", default="", help="a word for the table's heading")
    parser.add_argument("--only", nargs="+", default=[], help="rows whose name contains one of these")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON into this file")
    args = parser.parse_args(argv)
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}
    env.update(MPLBACKEND="Agg", PYTHONPATH=str(args.repo))
    if args.threads:
        env.update({v: str(args.threads) for v in THREAD_VARIABLES})
    threads = (f"{args.threads} (set by the user)" if args.threads
               else "chosen by the command (mlp-ref: 1; an older checkout: one per CPU)")
    rows = [r for r in ROWS if not args.only or any(o in r[0] for o in args.only)]
    load = os.getloadavg()[0]
    print(f"{args.label or args.repo}: BLAS threads {threads}; {os.cpu_count()} CPUs, "
          f"load {load:.1f}", flush=True)
    print(f"| {'command':18} | {'CPU s':>7} | {'wall s':>7} | {'target':>6} | |")
    print(f"|{'-' * 20}|{'-' * 9}|{'-' * 9}|{'-' * 8}|---|")
    out = Path(tempfile.mkdtemp(prefix="mlp-ref-classroom-"))
    measured = {}
    try:
        for name, command, target in rows:
            command = [c.replace("OUT", str(out)) for c in command]
            cpu, wall, status, tail = measure(command, args.repo, env)
            measured[name] = {"cpu_s": round(cpu, 1), "wall_s": round(wall, 1), "target_cpu_s": target,
                              "status": status}
            verdict = "ok" if status == 0 and cpu <= target else (
                f"exit {status}: {tail}" if status else f"over by {cpu - target:.1f} s")
            print(f"| {name:18} | {cpu:7.1f} | {wall:7.1f} | {target:6d} | {verdict} |", flush=True)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    if args.json:
        import numpy
        if args.only and args.json.exists():        # some rows measured again: the others kept
            measured = {**json.loads(args.json.read_text())["rows"], **measured}
            measured = {name: measured[name] for name, _, _ in ROWS if name in measured}
        document = {"rows": measured, "blas_threads": threads,
                    "machine": {"cpus": os.cpu_count(), "load_at_start": round(load, 1),
                                "python": platform.python_version(), "numpy": numpy.__version__,
                                "processor": platform.machine()}}
        args.json.write_text(json.dumps(document, indent=1) + "\n")


if __name__ == "__main__":
    main()
