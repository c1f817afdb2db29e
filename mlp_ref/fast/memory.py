"""What a call allocates, measured with tracemalloc: the bench's peaks and the continual run's."""
from __future__ import annotations

import tracemalloc


def peak_bytes(f):
    """The peak of memory allocated while f() runs, above what was allocated before (tracemalloc)."""
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        f()
        return int(tracemalloc.get_traced_memory()[1] - base)
    finally:
        if not was_tracing:
            tracemalloc.stop()
