"""The figures command of an installed wheel, and the measurements it drew the figures from.

    python -I _wheel_figures.py OUT DATA NAME [NAME ...]

Runs ``python -m mlp_ref figures --out OUT`` as that command runs (``runpy``: the ``__main__``
module of the mlp_ref this Python imports, with those arguments; ``-I``: not from this folder),
then pickles into DATA the measurements ``NAME ...`` of ``mlp_ref.figures``, each as the
command computed it once to draw its figures, with where mlp_ref was imported from and its
console script. The tests check their claims on those very numbers instead of computing them
a second time (``_background.figure_data``).
"""
import pickle
import runpy
import sys
from importlib.metadata import distribution

out, data, names = sys.argv[1], sys.argv[2], sys.argv[3:]
sys.argv = ["mlp_ref", "figures", "--out", out]          # argv[0]: runpy sets it to the file
try:
    runpy.run_module("mlp_ref", run_name="__main__", alter_sys=True)
except SystemExit as exc:                                # __main__ ends with SystemExit(main())
    if exc.code:
        raise

import mlp_ref  # noqa: E402  (imported by the command already: its own module)
from mlp_ref import figures  # noqa: E402

with open(data, "wb") as fh:
    pickle.dump({"where": mlp_ref.__file__,
                 "script": [e.value for e in distribution("mlp-ref").entry_points if e.name == "mlp-ref"],
                 "measurements": {name: getattr(figures, name)() for name in names}}, fh)
