"""``python -m mlp_ref`` is the same program as the ``mlp-ref`` console script."""
from .cli import main

raise SystemExit(main())
