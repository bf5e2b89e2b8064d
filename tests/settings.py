"""The test suite's settings: the product's (lcmsite/settings.py) with the benchmarks app
installed, as tests/benchmarks runs lcm_bench and lcm_eval in-process."""

import os

os.environ["LCM_BENCHMARKS_APP"] = "1"  # read by lcmsite/settings.py

from lcmsite.settings import *  # noqa: E402, F403
