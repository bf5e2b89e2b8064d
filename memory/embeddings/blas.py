"""One BLAS thread for the embedding model and the vector cache, unless the environment says
otherwise.

numpy's OpenBLAS starts one thread per core and has them spin for work. On a machine whose
cores are shared (web processes, workers, PostgreSQL, other jobs) those threads fight the
rest: measured here under load, embedding one short query took 2.9 s p50 with the default
threads and 47 ms with one. A server process serves each request on one thread anyway, so
the model runs with a single BLAS thread. `OPENBLAS_NUM_THREADS` (or `OMP_NUM_THREADS`),
when set, wins: then this does nothing.

threadpoolctl finds the BLAS library numpy loaded (OpenBLAS, scipy-openblas, MKL or BLIS)
and calls its own set-threads function.
"""

from __future__ import annotations

import logging
import os

logger = logging.getLogger("lcm.memory")

_done = False


def limit_blas_threads(threads: int = 1) -> bool:
    """Set numpy's BLAS to `threads` threads, once per process; True if it did."""
    global _done
    if _done or os.environ.get("OPENBLAS_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS"):
        return False
    _done = True
    import numpy  # noqa: F401 - loads the BLAS library this limits
    from threadpoolctl import ThreadpoolController

    blas = ThreadpoolController().select(user_api="blas")
    if not blas.lib_controllers:
        logger.debug("no BLAS library found to limit; BLAS threads left as they are")
        return False
    blas.limit(limits=threads)
    return True
