"""The figures command from this checkout, and the continual-learning run it drew.

    python tests/_figures_run.py OUT RUN [FIGURE ...]

runs ``python -m mlp_ref figures --out OUT [--only FIGURE ...]`` (the same ``cli.main``), then
pickles into RUN the run of ``continual.run()`` that its continual figures were drawn from
(``figures.continual_run``, computed once per process). tests/test_continual.py asserts its
claims on that very run: the run the figures show is the run the tests check, and the suite
computes it once instead of once more in the test process.
"""
import pickle
import sys

from mlp_ref import cli, figures

if __name__ == "__main__":
    out, run, *names = sys.argv[1:]
    status = cli.main(["figures", "--out", out, *(["--only", *names] if names else [])])
    if status == 0:
        with open(run, "wb") as f:
            pickle.dump(figures.continual_run(), f)
    sys.exit(status)
