"""``python -m mlp_ref`` is the same program as the ``mlp-ref`` console script."""
from .classroom.cli import main

raise SystemExit(main())
