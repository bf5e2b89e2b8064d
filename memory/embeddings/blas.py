"""One BLAS thread for the embedding model, unless the environment says otherwise.

numpy's OpenBLAS starts one thread per core and has them spin for work. On a machine whose
cores are shared (web processes, workers, PostgreSQL, other jobs) those threads fight the
rest: measured here under load, embedding one short query took 2.9 s p50 with the default
threads and 47 ms with one. A server process serves each request on one thread anyway, so
the model runs with a single BLAS thread. `OPENBLAS_NUM_THREADS` (or `OMP_NUM_THREADS`),
when set, wins: then this does nothing.
"""

from __future__ import annotations

import ctypes
import logging
import os

logger = logging.getLogger("lcm.memory")

_SETTERS = (
    "scipy_openblas_set_num_threads64_",  # numpy >= 2 wheels (scipy-openblas, ILP64)
    "scipy_openblas_set_num_threads",
    "openblas_set_num_threads64_",
    "openblas_set_num_threads",
)
_done = False


def _loaded_openblas() -> list[str]:
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line.lower()}
    except OSError:  # not Linux: leave BLAS alone
        return []
    return sorted(p for p in paths if p.startswith("/"))


def limit_blas_threads(threads: int = 1) -> bool:
    """Set numpy's OpenBLAS to `threads` threads, once per process; True if it did."""
    global _done
    if _done or os.environ.get("OPENBLAS_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS"):
        return False
    _done = True
    import numpy  # noqa: F401 - loads the BLAS library this looks for

    for path in _loaded_openblas():
        library = ctypes.CDLL(path)
        for name in _SETTERS:
            setter = getattr(library, name, None)
            if setter is not None:
                setter(ctypes.c_int(threads))
                return True
    logger.debug("no OpenBLAS found to limit; BLAS threads left as they are")
    return False
