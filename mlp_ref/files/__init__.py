"""File plumbing, below the lesson: every file the package writes is written whole or not at all.

    atomic   write a file through a temporary file and one rename (the figures, the JSON, the nets)
    saving   ``MLP.save`` and ``MLP.load``: an .npz of plain arrays, never a pickle
    idx      MNIST's four IDX files, read from a user's folder (``continual-table --data mnist:DIR``)
"""
