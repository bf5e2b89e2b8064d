"""Fault injection for the crash tests (tests/archive/test_crash.py): when the environment
variable LCM_ARCHIVE_CRASH_AT names a step, the process kills itself with SIGKILL there,
as a worker dies on power loss or OOM. Unset (always, outside those tests) it does nothing.
It is an environment variable rather than a setting so that no configuration can turn it on.
"""

from __future__ import annotations

import os
import signal

STEPS = (
    "written",
    "verified",
    "cleared",
    "committed",
    "restore_written",
    "restore_committed",
    "reencrypt_written",
    "reencrypt_switched",
)


def crash_point(step: str) -> None:
    if os.environ.get("LCM_ARCHIVE_CRASH_AT") == step:
        os.kill(os.getpid(), signal.SIGKILL)
