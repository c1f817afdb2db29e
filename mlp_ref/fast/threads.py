"""How many threads the BLAS runs: one for the classroom's networks, chosen by the package.

The question's networks are tiny (3-4-2, 3-16-16-2, 64-100-100-10): a matrix product of theirs
takes microseconds, less than it takes to wake a second thread. OpenBLAS starts one thread per
CPU all the same, and its threads spin while they wait for work, so on these sizes every extra
thread multiplies the CPU time a run costs and speeds nothing up (tutorial 09 paid 218 CPU s
with a thread per CPU of a busy 2-core machine, 42 with one). So every command of
``python -m mlp_ref`` but ``bench``, and every tutorial run as a script, calls
:func:`one_blas_thread` before its first matrix product. ``bench`` and the measurements of large
networks (``python -m mlp_ref.measurements.scale``) keep the library's threads.

Two ways, by what is installed, both the ecosystem's own:

* threadpoolctl (the ``test`` and ``notebooks`` extras install it) asks the loaded BLAS to use
  one thread from now on, in this process: nothing else changes;
* without it, the BLAS reads ``OPENBLAS_NUM_THREADS`` (and its kin) only when NumPy loads it,
  which has happened by the time a command runs; so the command starts itself again, at once,
  with those variables set to 1 (``os.execv``: the same process id, arguments, input and
  output), and its children (the grader's, a figure's) inherit them.

A user who sets any of these variables keeps their choice: nothing is changed, nothing restarts.
Nothing is printed unless asked (``describe``).
"""
from __future__ import annotations

import os
import sys

try:                                # optional: the test and notebooks extras install it
    import threadpoolctl
except ImportError:
    threadpoolctl = None

#: The variables BLAS libraries read for their thread count (OpenBLAS, OpenMP, MKL, BLIS, macOS).
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                    "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")

#: Set beside them when the package set them, so that the process started again knows it was not
#: the user's choice.
MARK = "MLP_REF_SET_BLAS_THREADS"
#: How this process chose its BLAS threads, for ``describe``: set by ``one_blas_thread``.
CHOSEN = "the library's default (one_blas_thread not called)"
_limiter = None                     # threadpoolctl's limits, kept alive for the process


def user_choice():
    """The first of ``THREAD_VARIABLES`` the user set, as "NAME=VALUE", or None."""
    return next((f"{v}={os.environ[v]}" for v in THREAD_VARIABLES if os.environ.get(v, "").strip()), None)


def one_blas_thread(argv=None):
    """Run the BLAS on one thread from here on, unless the user chose a count.

    ``argv``: the command line that started this process (``sys.orig_argv``), given only by a
    program's entry point (a command, a tutorial run as a script). Without threadpoolctl it is
    run again with the variables set; without either (a notebook with no threadpoolctl), the
    BLAS keeps its threads, and ``describe`` says so. Returns how the count was chosen."""
    global CHOSEN, _limiter
    chosen = user_choice()
    if chosen and os.environ.get(MARK):
        CHOSEN = "1 thread (the variables set before NumPy loaded: the command started again)"
        return CHOSEN
    if chosen:
        CHOSEN = f"the user's {chosen}"
        return CHOSEN
    if threadpoolctl is not None:
        _limiter = threadpoolctl.threadpool_limits(limits=1, user_api="blas")
        CHOSEN = "1 thread (threadpoolctl)"
    elif argv:
        os.environ.update({v: "1" for v in THREAD_VARIABLES}, **{MARK: "1"})
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(sys.executable, list(argv))         # does not return
    else:
        CHOSEN = "the library's default (install threadpoolctl to run the small networks on one thread)"
    return CHOSEN


def describe():
    """One line: how many threads the BLAS runs in this process, and who chose it."""
    if threadpoolctl is None:
        now = "BLAS threads: (threadpoolctl not installed: not read)"
    else:
        counts = sorted({p["num_threads"] for p in threadpoolctl.threadpool_info()
                         if p.get("user_api") == "blas"})
        now = f"BLAS threads: {', '.join(map(str, counts)) or 'none loaded'}"
    return f"{now}; chosen: {CHOSEN}"
