"""The API answers as its OpenAPI schema says: a bounded schemathesis pass over every
operation of /api/v1/schema/ against a real server (`lcm_serve`, see conftest.py), with
every check (status codes, content types, response schemas, schema-valid requests
accepted, schema-violating requests rejected, no 5xx, auth not ignored).

All four phases (examples, coverage, fuzzing, and the stateful phase, which chains
operations through the links schemathesis infers: create a conversation, then append to
it), a few examples per operation (fixed seed, so a failure reproduces). It runs once, on
PostgreSQL when the run has it (the process tests' run), else on SQLite. The
full run (40 examples per operation) and its figures are in docs/reliability.md, "The API
contract"."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

# Not portable: run once, against PostgreSQL when CI has it (the production database), in
# the process tests' run, which mostly waits on its children; the SQLite run was CI's
# longest (docs/testing.md).
pytestmark = pytest.mark.process

EXAMPLES_PER_OPERATION = 3
SEED = "20261125"
ROOT = Path(__file__).resolve().parents[2]


def test_every_operation_answers_as_the_schema_says(contract_server, tmp_path):
    st = Path(sys.executable).with_name("st")
    run = subprocess.run(
        [
            str(st),
            "--config-file",
            str(Path(__file__).with_name("schemathesis.toml")),
            "run",
            contract_server.url + "/api/v1/schema/?format=json",
            "-H",
            f"Authorization: Token {contract_server.token}",
            "--checks",
            "all",
            # A retention policy's DELETE leaves the effective policy for the GET after it
            # (tests/contract/schemathesis.toml): not a deleted resource still served.
            "--exclude-checks",
            "use_after_free",
            "--phases",
            "examples,coverage,fuzzing,stateful",
            "--max-examples",
            str(EXAMPLES_PER_OPERATION),
            "--seed",
            SEED,
            "--no-shrink",
            "--report-dir",
            str(tmp_path),
        ],
        cwd=tmp_path,  # schemathesis keeps a .schemathesis/ cache in its working directory
        env={**os.environ, "PYTHONPATH": str(ROOT)},  # for the config's hooks module
        capture_output=True,
        text=True,
        timeout=600,
    )
    summary = run.stdout[-8000:]
    assert run.returncode == 0, summary  # schemathesis exits 1 on any failed check
    selected = re.search(r"Selected: (\d+)/(\d+)", summary)
    tested = re.search(r"Tested: (\d+)", summary)
    assert selected and tested, summary
    assert int(tested.group(1)) == int(selected.group(1)) > 40, summary  # every selected one
