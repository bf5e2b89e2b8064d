"""Every LCM_* setting in one table: its type, default, accepted range and meaning.

`load_lcm_settings(environ)` parses and validates them; a bad value raises
`ImproperlyConfigured` naming the variable and the accepted range, which stops
`manage.py`, the worker and the web server before they do anything.
The README's settings table is generated from this table (`manage.py lcm_settings`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


@dataclass(frozen=True)
class Setting:
    name: str
    kind: type  # bool, int, float or str
    default: Any
    help: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] | None = None
    prefixes: tuple[str, ...] | None = None  # a URL: empty, or starting with one of these

    def accepted(self) -> str:
        if self.kind is bool:
            return "true/false (1/0, yes/no, on/off)"
        if self.prefixes:
            return "empty, or a URL starting with " + ", ".join(self.prefixes)
        if self.choices:
            return "one of " + ", ".join(self.choices)
        if self.minimum is not None and self.maximum is not None:
            return f"{self.kind.__name__} from {self.minimum:g} to {self.maximum:g}"
        if self.minimum is not None:
            return f"{self.kind.__name__} >= {self.minimum:g}"
        return "a string"

    def parse(self, raw: str) -> Any:
        problem = f"{self.name}={raw!r} is invalid: expected {self.accepted()}"
        if self.kind is bool:
            value = raw.strip().lower()
            if value in _TRUE:
                return True
            if value in _FALSE:
                return False
            raise ImproperlyConfigured(problem)
        if self.kind in (int, float):
            try:
                number = self.kind(raw.strip())
            except ValueError:
                raise ImproperlyConfigured(problem) from None
            if number != number or (self.minimum is not None and number < self.minimum):
                raise ImproperlyConfigured(problem)
            if self.maximum is not None and number > self.maximum:
                raise ImproperlyConfigured(problem)
            return number
        if self.choices and raw not in self.choices:
            raise ImproperlyConfigured(problem)
        if self.prefixes and raw and not raw.startswith(self.prefixes):
            raise ImproperlyConfigured(problem)
        return raw


SETTINGS: tuple[Setting, ...] = (
    # Core switches
    Setting(
        "LCM_ENABLED",
        bool,
        True,
        "Master switch: when false, ingest still stores messages but no compaction is scheduled.",
    ),
    Setting(
        "LCM_AUTOCOMPACT_DISABLED",
        bool,
        False,
        "Stop automatic (threshold) compaction jobs; manual compaction still works.",
    ),
    # Budgets and thresholds
    Setting(
        "LCM_DEFAULT_TOKEN_BUDGET",
        int,
        128000,
        "Token budget of a new conversation when the client gives none.",
        256,
        10_000_000,
    ),
    Setting(
        "LCM_CONTEXT_THRESHOLD",
        float,
        0.75,
        "Compaction is due when the assembled context reaches this fraction of the budget.",
        0.05,
        1.0,
    ),
    Setting(
        "LCM_MAX_ACTIVE_MESSAGES",
        int,
        2000,
        "Compaction is due when more raw messages than this are in the active context.",
        1,
        1_000_000,
    ),
    Setting(
        "LCM_FRESH_TAIL_COUNT",
        int,
        8,
        "Newest raw messages that are never compacted (the tail also always reaches back to the newest user message).",
        0,
        10_000,
    ),
    Setting("LCM_LEAF_TARGET_TOKENS", int, 600, "Target size of a leaf summary.", 32, 32_000),
    Setting(
        "LCM_CONDENSED_TARGET_TOKENS", int, 900, "Target size of a condensed summary.", 32, 32_000
    ),
    Setting(
        "LCM_LEAF_CHUNK_TOKENS",
        int,
        20000,
        "Largest run of raw message tokens one leaf pass summarizes.",
        256,
        1_000_000,
    ),
    Setting(
        "LCM_LEAF_MIN_FANOUT",
        int,
        8,
        "Contiguous leaf summaries needed before a condensed pass at depth 0.",
        2,
        1000,
    ),
    Setting(
        "LCM_CONDENSED_MIN_FANOUT",
        int,
        4,
        "Contiguous same-depth condensed summaries needed before the next condensed pass.",
        2,
        1000,
    ),
    Setting(
        "LCM_INCREMENTAL_MAX_DEPTH",
        int,
        1,
        "After an incremental leaf pass, condense up to this depth (0: leaves only).",
        0,
        20,
    ),
    Setting(
        "LCM_COMPACTION_MAX_PASSES",
        int,
        500,
        "Most passes one compaction run may make.",
        1,
        100_000,
    ),
    Setting(
        "LCM_COMPACTION_MAX_SECONDS", int, 600, "Wall-time bound of one compaction run.", 1, 86_400
    ),
    Setting(
        "LCM_COMPACTION_MAX_ROUNDS", int, 10, "Rounds of full sweeps in until-under mode.", 1, 1000
    ),
    # Retrieval
    Setting("LCM_MAX_EXPAND_TOKENS", int, 4000, "Default token cap of an expand.", 100, 1_000_000),
    Setting(
        "LCM_GREP_TIMEOUT_MS",
        int,
        2000,
        "Time limit of one grep query (regex runaway guard).",
        50,
        60_000,
    ),
    Setting(
        "LCM_EXPANSION_GRANT_TTL_SECONDS",
        int,
        600,
        "Lifetime of a sub-agent delegation grant.",
        10,
        86_400,
    ),
    Setting(
        "LCM_EXPANSION_MAX_ANSWER_TOKENS",
        int,
        2000,
        "Default answer size of a sub-agent expansion.",
        50,
        32_000,
    ),
    Setting(
        "LCM_EXPANSION_MAX_TOOL_CALLS",
        int,
        12,
        "Most tool calls one sub-agent expansion may make.",
        1,
        200,
    ),
    Setting(
        "LCM_EXPANSION_MODEL",
        str,
        "claude-haiku-4-5",
        "Model of the sub-agent expansion when ANTHROPIC_API_KEY is set (offline excerpt otherwise).",
    ),
    # Large files
    Setting(
        "LCM_LARGE_FILE_TOKEN_THRESHOLD",
        int,
        25000,
        "A <file> block (or tool output) of at least this many tokens is stored aside and replaced by a reference.",
        100,
        10_000_000,
    ),
    Setting(
        "LCM_FILE_PREVIEW_BYTES",
        int,
        65536,
        "Largest range one file-content read returns.",
        1024,
        100_000_000,
    ),
    # Summarizer model
    Setting(
        "LCM_SUMMARY_MODEL",
        str,
        "claude-haiku-4-5",
        "Model used for summaries when ANTHROPIC_API_KEY is set.",
    ),
    Setting(
        "LCM_SUMMARY_TIMEOUT_SECONDS", float, 60.0, "Timeout of one summarizer call.", 0.1, 3600
    ),
    Setting(
        "LCM_SUMMARY_MAX_RETRIES",
        int,
        3,
        "Retries of a summarizer call on overload or rate limit.",
        0,
        20,
    ),
    Setting(
        "LCM_SUMMARY_MAX_CALLS",
        int,
        500,
        "Spend guard: most model calls per conversation per window.",
        0,
        1_000_000,
    ),
    Setting(
        "LCM_SUMMARY_CALL_WINDOW_SECONDS", int, 3600, "Window of the spend guard.", 1, 2_592_000
    ),
    Setting(
        "LCM_CIRCUIT_BREAKER_FAILURES",
        int,
        5,
        "Consecutive provider failures that open the circuit breaker.",
        1,
        1000,
    ),
    Setting(
        "LCM_CIRCUIT_BREAKER_COOLDOWN_SECONDS",
        int,
        300,
        "How long an open circuit breaker sends work to the deterministic summarizer.",
        1,
        86_400,
    ),
    # Ingest and API
    Setting(
        "LCM_TOKEN_ESTIMATOR",
        str,
        "conversations.tokens.estimate_tokens",
        "Dotted path of the token estimator (a function str -> int).",
    ),
    Setting(
        "LCM_MAX_REQUEST_BYTES",
        int,
        33_554_432,
        "Largest request body the API accepts (413 above it).",
        1024,
        2_147_483_647,
    ),
    Setting(
        "LCM_MAX_BATCH_MESSAGES", int, 1000, "Most messages one batch append may carry.", 1, 1000
    ),
    # Deployment
    Setting("LCM_DATA_DIR", str, "./var", "Where the SQLite database, stored files and logs live."),
    Setting(
        "LCM_DATABASE_URL",
        str,
        "",
        "Database URL (postgres://... or sqlite:///...); falls back to DATABASE_URL, then to SQLite under LCM_DATA_DIR.",
        prefixes=("postgres://", "postgresql://", "sqlite://"),
    ),
    Setting(
        "LCM_REDIS_URL",
        str,
        "",
        "When set, the background worker uses this Redis broker instead of the database.",
        prefixes=("redis://", "rediss://", "unix://"),
    ),
    Setting(
        "LCM_SECRET_KEY",
        str,
        "",
        "Django secret key; a key is generated and kept under LCM_DATA_DIR when unset.",
    ),
    Setting("LCM_DEBUG", bool, False, "Django debug mode."),
    Setting(
        "LCM_ALLOWED_HOSTS",
        str,
        "127.0.0.1,localhost",
        "Comma-separated host names the server answers.",
    ),
    Setting(
        "LCM_SQLITE_BUSY_TIMEOUT_MS",
        int,
        20000,
        "How long a SQLite writer waits for the write lock.",
        0,
        600_000,
    ),
    Setting("LCM_WORKERS", int, 2, "Background worker processes started by qcluster.", 1, 64),
    Setting(
        "LCM_LOG_LEVEL",
        str,
        "INFO",
        "Log level of the lcm loggers.",
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
    ),
)

SETTINGS_BY_NAME = {setting.name: setting for setting in SETTINGS}


def load_lcm_settings(environ: Mapping[str, str]) -> dict[str, Any]:
    """Parse every LCM_* setting from `environ`, raising on the first bad one."""
    values: dict[str, Any] = {}
    for setting in SETTINGS:
        raw = environ.get(setting.name)
        values[setting.name] = setting.default if raw is None else setting.parse(raw)
    return values


def settings_table_markdown() -> str:
    rows = ["| variable | default | accepted | meaning |", "|---|---|---|---|"]
    for s in SETTINGS:
        default = (
            "(empty)"
            if s.default == ""
            else str(s.default).lower()
            if s.kind is bool
            else s.default
        )
        rows.append(f"| `{s.name}` | `{default}` | {s.accepted()} | {s.help} |")
    return "\n".join(rows)
