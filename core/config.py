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
        "LCM_COMPACTION_LOW_WATER",
        float,
        0.5,
        "Automatic compaction brings the context down to this fraction of the budget (at most the threshold): one pass then buys many turns of an unchanged, cacheable prefix (docs/cost.md).",
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
        "Newest raw messages that are never compacted (the tail also reaches back to the newest user message while it stays within LCM_TAIL_MAX_TOKENS; past that it starts where no tool call is split from its results).",
        0,
        10_000,
    ),
    Setting(
        "LCM_TAIL_TOOL_OUTPUT_MAX_TOKENS",
        int,
        2000,
        "A tool output in the assembled context larger than this is sent as a reference with its head and tail (the oldest first, until the tail fits LCM_TAIL_MAX_TOKENS; the store is unchanged; lcm_describe reads it whole). 0: never.",
        0,
        10_000_000,
    ),
    Setting(
        "LCM_TAIL_MAX_TOKENS",
        int,
        8000,
        "The fresh tail's cap, never more than half the context's budget: large tool outputs are shortened until the newest messages fit it, and the tail reaches back to the newest user message only while it fits (tool outputs shortened).",
        100,
        10_000_000,
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
        "Model of the sub-agent expansion when ANTHROPIC_API_KEY is set (offline excerpt otherwise) and LCM_EXPANSION_PROVIDER_MODEL is empty.",
    ),
    Setting(
        "LCM_EXPANSION_PROVIDER_MODEL",
        str,
        "",
        "Name of a configured model (docs/providers.md) for sub-agent expansion, on any provider; empty: LCM_EXPANSION_MODEL on Anthropic when ANTHROPIC_API_KEY is set, else the offline excerpt.",
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
        "Model used for summaries when ANTHROPIC_API_KEY is set (and LCM_SUMMARY_PROVIDER_MODEL is empty).",
    ),
    Setting(
        "LCM_SUMMARY_PROVIDER_MODEL",
        str,
        "",
        "Name of a configured model (docs/providers.md) for compaction summaries and large-file text summaries, on any provider; empty: LCM_SUMMARY_MODEL on Anthropic when ANTHROPIC_API_KEY is set, else the deterministic summarizer.",
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
        "LCM_SUMMARY_MIN_FIDELITY",
        float,
        0.7,
        "Model summaries naming less than this share of their sources' handles are asked "
        "again once, naming the missing ones, then get them appended (0 turns the gate off).",
        0,
        1,
    ),
    Setting(
        "LCM_SUMMARY_MIN_RELATIONS",
        float,
        0.5,
        "Model leaf summaries holding less than this share of their span's relation probes "
        "(which file changed how, which error was fixed by what, what the user asked, what "
        "was chosen and why, what is open) are asked again once, then replaced by the "
        "deterministic summary (0 turns this check off).",
        0,
        1,
    ),
    Setting(
        "LCM_SUMMARY_CALL_WINDOW_SECONDS", int, 3600, "Window of the spend guard.", 1, 2_592_000
    ),
    Setting(
        "LCM_REPAIR_ENABLED",
        bool,
        True,
        "After a coding agent compacts its own session, its SessionStart hook hands back what "
        "the agent's summary dropped (docs/capture.md, Repair); false turns it off.",
    ),
    Setting(
        "LCM_REPAIR_TOKEN_BUDGET",
        int,
        1500,
        "Most tokens of the repair handed back after an agent's compaction, and of a "
        "session hand-off.",
        100,
        20_000,
    ),
    Setting(
        "LCM_HANDOFF_RECENT_HOURS",
        float,
        12.0,
        "A new agent session (SessionStart startup) gets the hand-off of the latest session "
        "in its project that ended within this many hours (0: never).",
        0,
        8760,
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
        "core.token_estimate.estimate_tokens",
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
        "When set, the background worker uses this Redis broker instead of the database, "
        "and Django's cache is Redis too, so rate limits are shared by every process.",
        prefixes=("redis://", "rediss://", "unix://"),
    ),
    Setting(
        "LCM_QUEUE_NAME",
        str,
        "lcm",
        "Name of the background job queue (the django-q cluster): web processes and workers "
        "that share a broker and this name share the jobs (docs/deploy.md).",
    ),
    # Shared storage for several hosts (docs/deploy.md): an S3-compatible object store.
    Setting(
        "LCM_S3_BUCKET",
        str,
        "",
        "When set, large-file objects and finished stream journals and turn event logs are "
        "kept in this S3 bucket (django-storages, `pip install .[s3]`) instead of under "
        "LCM_DATA_DIR. Credentials come from the usual AWS variables "
        "(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) or the instance's role.",
    ),
    Setting(
        "LCM_S3_ENDPOINT_URL",
        str,
        "",
        "Endpoint of an S3-compatible store (MinIO, Ceph, R2...); empty: AWS S3.",
        prefixes=("http://", "https://"),
    ),
    Setting("LCM_S3_REGION", str, "", "Region of the bucket (empty: the AWS default)."),
    Setting(
        "LCM_S3_PREFIX",
        str,
        "lcm",
        "Key prefix of every object LCM writes in the bucket (`<prefix>/large-files/...`, "
        "`<prefix>/streams/...`).",
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
        "LCM_URGENT_WORKERS",
        int,
        1,
        "Worker processes of the urgent queue (compaction and turn state commits, which the "
        "next turn's context waits on), started by qcluster beside its own; 0: one queue for "
        "everything (docs/deploy.md).",
        0,
        16,
    ),
    Setting(
        "LCM_LOG_LEVEL",
        str,
        "INFO",
        "Log level of the lcm loggers.",
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
    ),
    # Providers (docs/providers.md)
    Setting(
        "LCM_CONFIG_FILE",
        str,
        "",
        "TOML file of models and engine settings (SRD 18 shape); built-in models when empty.",
    ),
    Setting(
        "LCM_DEFAULT_MODEL",
        str,
        "",
        "Model name used when a turn names none; wins over [general] default_model.",
    ),
    Setting(
        "LCM_REDACTION_HOOK",
        str,
        "providers.redaction.redact_secrets",
        "Dotted path of a str -> str function applied to every outbound prompt text; "
        "empty turns redaction off.",
    ),
    Setting(
        "LCM_SECRET_POLICY",
        str,
        "mask",
        "What ingest does with a secret it finds in new content (API keys, tokens, private "
        "keys, credentials in URLs): mask (replace it by [secret:<kind>] before storing), "
        "flag (store it, list it for review) or off; users and conversations may override "
        "it (docs/security.md).",
        choices=("mask", "flag", "off"),
    ),
    Setting(
        "LCM_PROVIDER_MAX_RETRIES",
        int,
        2,
        "Retries of a provider call on 429/529/5xx before the first byte (honours retry-after).",
        0,
        10,
    ),
    Setting(
        "LCM_PROVIDER_TIMEOUT_SECONDS",
        float,
        600.0,
        "Read timeout of one provider call (between bytes of a stream).",
        1,
        3600,
    ),
    # --- Turn engine (turns/) ---
    Setting(
        "LCM_TURN_MAX_CONTENT_CHARS",
        int,
        200_000,
        "Largest user message a turn accepts, in characters (larger: 413).",
        1,
        10_000_000,
    ),
    Setting(
        "LCM_STATE_TARGET_TOKENS",
        int,
        2000,
        "Target size of a branch state summary written by the librarian, in tokens.",
        200,
        100_000,
    ),
    Setting(
        "LCM_STATE_FOLD_TOKENS",
        int,
        4000,
        "`state` strategy: how many tokens of turns a request may carry verbatim after the "
        "state it sends before they are folded into a newer state (also capped by what the "
        "model's window leaves); 0 sends the newest state every turn.",
        0,
        1_000_000,
    ),
    Setting(
        "LCM_LIBRARIAN_MODEL",
        str,
        "haiku",
        "Model (a name from the model config) the librarian uses when its key is set; "
        "otherwise the deterministic librarian writes states.",
    ),
    Setting(
        "LCM_TURN_JOB_LEASE_SECONDS",
        int,
        30,
        "How long a worker owns a turn job before another worker may take it over.",
        5,
        86_400,
    ),
    Setting(
        "LCM_RECONCILE_INTERVAL_SECONDS",
        int,
        30,
        "How often the worker's scheduled reconciler looks for unfinished turns.",
        5,
        3600,
    ),
    # --- Semantic memory (memory/, docs/memory.md) ---
    Setting(
        "LCM_EMBEDDING_BACKEND",
        str,
        "auto",
        "Embedding backend: auto (minilm if installed, else static), minilm (offline "
        "all-MiniLM-L6-v2), static (offline WordLlama), hashing (lexical, no model), openai "
        "(needs OPENAI_API_KEY). A change starts a new namespace and a re-index.",
        choices=("auto", "minilm", "static", "hashing", "openai"),
    ),
    Setting(
        "LCM_EMBEDDING_MODEL",
        str,
        "",
        "Model of the openai backend (default text-embedding-3-small); for minilm, int8 (default: "
        "the quantized graph) or fp32 (numpy's vectors), each its own namespace; for hashing, "
        "the dimension.",
    ),
    Setting(
        "LCM_VECTOR_INDEX",
        str,
        "auto",
        "Vector search: auto (numpy exact scan), numpy, sqlite_vec (SQLite only; "
        "`pip install .[sqlite-vec]`), pgvector (PostgreSQL with the extension).",
        choices=("auto", "numpy", "sqlite_vec", "pgvector"),
    ),
    Setting(
        "LCM_VECTOR_CACHE_DTYPE",
        str,
        "int16",
        "How the per-process vector cache keeps vectors: int16 (16-bit integers with a scale "
        "per row: half the memory of float32, faster scans, cosines a few 1e-6 from "
        "float32's) or float32 (as stored).",
        choices=("int16", "float32"),
    ),
    Setting(
        "LCM_MEMORY_INDEX_MESSAGES",
        bool,
        True,
        "Chunk and embed messages ingested through the messages API (a background job).",
    ),
    # --- Search units and ranking (memory/recall.py, docs/memory.md "Recall") ---
    Setting(
        "LCM_MEMORY_UNIT_TOKENS",
        int,
        24,
        "Size of a search unit: a message up to 1.5x this is one unit, a longer one is cut "
        "into its sentences (one of half this size or more stands alone, shorter fragments "
        "join the next; a sentence over 1.5x this is cut between words) (0: the "
        "200-800-token semantic chunks instead). Changing it applies to messages indexed "
        "afterwards.",
        0,
        2000,
    ),
    Setting(
        "LCM_MEMORY_INDEX_BATCH_CONVERSATIONS",
        int,
        16,
        "An indexing job also takes up to this many conversations in all whose own job is "
        "queued and not started, and embeds their new messages in one call (1: one "
        "conversation per job).",
        1,
        1000,
    ),
    Setting(
        "LCM_MEMORY_INDEX_JOB_SECONDS",
        int,
        30,
        "An indexing job starts no new round after this long: it queues a job for what is "
        "left and ends, so no job nears the worker's timeout and other jobs get their turn.",
        1,
        3600,
    ),
    Setting(
        "LCM_MEMORY_INDEX_REQUEUE_SECONDS",
        int,
        600,
        "A queued indexing job not started after this long is presumed lost (a worker killed "
        "while it held the job) and queued again, by the next append or the worker's "
        "reconciler.",
        1,
        86_400,
    ),
    Setting(
        "LCM_MEMORY_EMBED_TOOL_RESULT_TOKENS",
        int,
        2000,
        "A tool result longer than this many tokens has only the search units in its "
        "first and last half of it embedded; the units between are found by their words "
        "only (BM25). 0: every unit embedded. Applies to messages indexed afterwards.",
        0,
        1000000,
    ),
    Setting(
        "LCM_SEARCH_BM25_WEIGHT",
        float,
        0.3,
        "Weight of the BM25 leg in search's z-score fusion (the cosine leg gets 1 - this).",
        0,
        1,
    ),
    Setting(
        "LCM_SEARCH_NEIGHBOUR_WEIGHT",
        float,
        0.5,
        "Search adds this share of the adjacent units' fused scores to a unit's own (hybrid: their semantic scores above 1 sigma; 0: off).",
        0,
        2,
    ),
    Setting(
        "LCM_SEARCH_MESSAGE_WEIGHT",
        float,
        0.6,
        "Hybrid search ranks messages: weight of a message's whole-text BM25 (z-scored over "
        "the messages matching any query term) added to its best unit's score (0: off).",
        0,
        5,
    ),
    Setting(
        "LCM_SEARCH_LEXICAL_CONFIDENCE",
        float,
        0.5,
        "Hybrid search: share of the question's IDF mass the best matching message must hold "
        "for the BM25 leg to have its full weight; below it, proportionally less (0: always "
        "full).",
        0,
        1,
    ),
    Setting(
        "LCM_SEARCH_SPEAKER_WEIGHT",
        float,
        2.5,
        "Hybrid search: when a question names exactly one of a transcript's speakers "
        '("What games did Aqib play?"), that speaker\'s messages gain this much (z units '
        "of the message ranking) over the other speakers' (0: off).",
        0,
        10,
    ),
    Setting(
        "LCM_SEARCH_PASSAGE_TOKENS",
        int,
        40,
        "Largest passage a semantic or hybrid grep row returns as `text`: the matched unit "
        "and its neighbours in the same message, while they fit (the unit alone if larger).",
        1,
        4000,
    ),
    Setting(
        "LCM_CHUNK_MIN_TOKENS",
        int,
        200,
        "Chunks grow to at least this many tokens unless a boundary (heading, topic shift, "
        "tool result, end of source) comes first.",
        20,
        4000,
    ),
    Setting("LCM_CHUNK_MAX_TOKENS", int, 800, "Largest chunk, in tokens.", 50, 8000),
    Setting(
        "LCM_CHUNK_OVERLAP_TOKENS",
        int,
        50,
        "Tokens repeated between the pieces of a text split for size (0: none).",
        0,
        400,
    ),
    Setting(
        "LCM_CHUNK_TOPIC_SHIFT",
        float,
        0.30,
        "Adjacent blocks whose embedding similarity is below this start a new chunk.",
        -1,
        1,
    ),
    Setting(
        "LCM_RETRIEVAL_TOP_K",
        int,
        6,
        "Results of memory_search and the retrieve API by default; the fewest items a turn's "
        "retrieval asks for (it asks for as many as its budget holds).",
        1,
        100,
    ),
    Setting(
        "LCM_RETRIEVAL_OVERFETCH_K",
        int,
        16,
        "The fewest units a turn's retrieval asks of search before its threshold.",
        1,
        1000,
    ),
    Setting(
        "LCM_RETRIEVAL_SIMILARITY_THRESHOLD",
        float,
        0.72,
        "A turn's retrieval drops units below this calibrated similarity (after the recency "
        "boost), except those holding every query term; grep drops summaries below it. See "
        "docs/memory.md for the calibration per model.",
        0,
        2,
    ),
    Setting(
        "LCM_RETRIEVAL_RECENCY_BOOST",
        float,
        0.10,
        "A turn's retrieval adds this to the score and similarity of the newest candidate, "
        "decaying linearly to 0 for the oldest.",
        0,
        1,
    ),
    Setting(
        "LCM_RETRIEVAL_WINDOW_SHARE",
        float,
        0.03,
        "A turn's retrieved-memory block is at most this share of the model's context window "
        "(and at most [budget] max_retrieval_tokens): 480 tokens at 16k, 960 at 32k, 6,000 "
        "at 200k. 0 turns a turn's retrieval off (manual attachments still go in).",
        0,
        1,
    ),
    # LCM_RETRIEVAL_MMR and LCM_RETRIEVAL_MMR_LAMBDA were removed (MMR cost recall and time
    # in a turn's retrieval, docs/memory.md); an environment that still sets them is
    # accepted and they are ignored, like any unknown LCM_* variable.
    # LCM_RETRIEVAL_MAX_TOKENS was removed too: it capped the same packing budget as the
    # engine config's `[budget] max_retrieval_tokens` (SRD 18, default 6000 as well), which
    # is the one cap now (turns.context.budget_for); a value in the environment is ignored.
    Setting(
        "LCM_TOOL_MAX_RESULT_CHARS",
        int,
        20000,
        "A tool result longer than this is cut (with a note) before it goes back to the model.",
        500,
        1_000_000,
    ),
    Setting(
        "LCM_TURN_MAX_STEPS",
        int,
        8,
        "Most provider steps one turn may take (a tool loop stops there with tool_step_limit).",
        1,
        100,
    ),
    Setting(
        "LCM_TURN_THREADS",
        int,
        64,
        "Turns one web process runs at once (streaming turns run on this pool).",
        1,
        1024,
    ),
    Setting(
        "LCM_OFFLINE_STREAM_CHUNKS",
        int,
        12,
        "Deltas the offline provider streams one answer in (demos and tests).",
        1,
        10000,
    ),
    Setting(
        "LCM_OFFLINE_STREAM_DELAY_MS",
        int,
        0,
        "Pause of the offline provider before each delta, to make streaming visible in demos.",
        0,
        60000,
    ),
    # Security (SRD 14): encryption at rest, throttling
    Setting(
        "LCM_ENCRYPTION_KEY",
        str,
        "",
        "Fernet key that encrypts large-file objects, stream journals and turn event logs "
        "(empty: stored in clear). Make one with `manage.py lcm_rotate_key --generate`.",
    ),
    Setting(
        "LCM_ENCRYPTION_OLD_KEYS",
        str,
        "",
        "Comma-separated retired Fernet keys, still accepted for reading until "
        "`manage.py lcm_rotate_key` has re-encrypted everything under the current key.",
    ),
    Setting(
        "LCM_THROTTLE_USER_RATE",
        str,
        "10000/min",
        "API requests allowed per signed-in user or token (DRF rate, e.g. `600/min`; "
        "empty: no limit). Over it: 429 with `Retry-After`.",
    ),
    Setting(
        "LCM_THROTTLE_IP_RATE",
        str,
        "30000/min",
        "API requests allowed per client IP, whoever makes them (empty: no limit).",
    ),
    Setting(
        "LCM_AUTH_FAILURE_RATE",
        str,
        "300/min",
        "API requests refused for missing or bad credentials (401) allowed per client IP; "
        "beyond it every API request from that IP gets 429 until the window passes.",
    ),
    Setting(
        "LCM_LOGIN_FAILURE_RATE",
        str,
        "10/min",
        "Failed sign-ins allowed per client IP and per user name on the login page; "
        "further attempts get 429 with `Retry-After` until the window passes.",
    ),
    # --- /metrics guard (security/metrics_guard.py, docs/deploy.md) ---
    Setting(
        "LCM_METRICS_ALLOWED_NETWORKS",
        str,
        "127.0.0.0/8,::1/128",
        "Client networks allowed to read `/metrics` without a token, comma-separated "
        "(the peer address: behind a proxy, the proxy's); empty: none.",
    ),
    Setting(
        "LCM_METRICS_TOKEN",
        str,
        "",
        "When set, `/metrics` is also readable from anywhere with "
        "`Authorization: Bearer <this value>` (docs/deploy.md).",
    ),
    # --- API tokens (tokens/, docs/tokens.md) ---
    Setting(
        "LCM_TOKEN_DEFAULT_DAYS",
        int,
        365,
        "Lifetime of a newly issued API token in days (`lcm_token issue --days` overrides "
        "it); 0: tokens never expire. Tokens hashed from pre-hashing keys never expire.",
        0,
        36500,
    ),
    Setting(
        "LCM_EXPORT_KEEP_HOURS",
        int,
        24,
        "How long an export archive (`POST /api/v1/exports/`, built in the background) is "
        "kept for download before it is deleted (docs/security.md).",
        1,
        24 * 365,
    ),
    # --- Background job reliability (workers/, docs/reliability.md) ---
    Setting(
        "LCM_JOB_LEASE_SECONDS",
        int,
        30,
        "Lease of a running compaction or indexing job (renewed every third of it while the "
        "job runs); once it expires another worker takes the job over.",
        3,
        3600,
    ),
    Setting(
        "LCM_JOB_RECONCILE_SECONDS",
        int,
        15,
        "How often each worker process looks for compaction jobs whose worker died and "
        "conversations whose indexing fell behind with no job to catch them up.",
        1,
        3600,
    ),
    Setting(
        "LCM_JOB_MAX_ATTEMPTS",
        int,
        5,
        "Claims of one compaction job before a job whose worker keeps dying is failed.",
        1,
        1000,
    ),
    Setting(
        "LCM_WORKER_STOP_SECONDS",
        float,
        8.0,
        "After SIGTERM, how long `qcluster` lets running jobs finish their pass and release "
        "before it kills them.",
        0.5,
        600,
    ),
    # --- Retention and archive segments (archive/, retention/, docs/retention.md) ---
    Setting(
        "LCM_ARCHIVE_CODEC",
        str,
        "zstd",
        "Compression of new archive segments (zstd or gzip); readers accept both.",
        choices=("zstd", "gzip"),
    ),
    Setting(
        "LCM_ARCHIVE_SEGMENT_MESSAGES",
        int,
        500,
        "Most messages one archive segment holds (a contiguous seq range of one conversation).",
        minimum=1,
        maximum=100000,
    ),
    Setting(
        "LCM_ARCHIVE_CACHE_SECONDS",
        int,
        60,
        "How long a decoded archive segment stays cached in a process for reads (0: no cache).",
        minimum=0,
    ),
    Setting(
        "LCM_ARCHIVE_CACHE_SEGMENTS",
        int,
        64,
        "Most decoded archive segments a process keeps cached (least recently used out first).",
        minimum=1,
    ),
    Setting(
        "LCM_GREP_ARCHIVE_SEGMENTS",
        int,
        200,
        "Most archive segments (newest first) one grep with include_archived scans.",
        minimum=1,
    ),
    Setting(
        "LCM_GREP_ARCHIVE_CACHE_MB",
        int,
        64,
        "Most megabytes of archived text a process keeps for grep's include_archived scans "
        "(least recently used segments out first).",
        minimum=1,
    ),
    Setting(
        "LCM_RETENTION_ARCHIVE_AFTER_DAYS",
        int,
        0,
        "Server default policy: archive raw content of messages older than this many days, "
        "once covered by summaries and out of the active context (0: not by age).",
        minimum=0,
    ),
    Setting(
        "LCM_RETENTION_KEEP_NEWEST_TOKENS",
        int,
        0,
        "Server default policy: archive raw content beyond the newest N tokens of a "
        "conversation, once covered by summaries (0: not by size).",
        minimum=0,
    ),
    Setting(
        "LCM_RETENTION_DELETE_AFTER_DAYS",
        int,
        0,
        "Server default: hard-delete conversations idle for this many days, through the "
        "audited hard-delete path (0: never; off by default).",
        minimum=0,
    ),
    Setting(
        "LCM_RETENTION_ARCHIVED_VECTORS",
        str,
        "keep",
        "Server default policy: the memory vectors of archived content (every message of the "
        "chunk archived) stay float32 (keep) or are compressed to float16 or int8 (lossy; "
        "derived data, see docs/retention.md).",
        choices=("keep", "float16", "int8"),
    ),
    Setting(
        "LCM_RETENTION_ARCHIVED_FULLTEXT",
        str,
        "keep",
        "Server default policy: keep or drop the memory full-text rows of archived content "
        "(drop: memory_search's full-text leg no longer finds them; grep's search still does), "
        "or archive: drop them and move the memory units' text to the archive too (read back "
        "from there; the unit search's word leg no longer finds them, their vectors still do).",
        choices=("keep", "drop", "archive"),
    ),
    Setting(
        "LCM_RETENTION_BATCH_SEGMENTS",
        int,
        20,
        "Most segments one scheduled retention run archives before it stops (bounded batches).",
        minimum=1,
    ),
    # Drop-in endpoints (docs/drop-in.md) ---------------------------------------------------
    Setting(
        "LCM_DROPIN_MEMORY_TOOLS",
        bool,
        False,
        "Offer the memory tools (lcm_grep, lcm_describe, lcm_expand, memory_search) on every "
        "drop-in request, as `X-LCM-Tools: memory` does for one.",
    ),
    # Context receipts (docs/receipts.md) ----------------------------------------------------
    Setting(
        "LCM_RECEIPTS",
        bool,
        True,
        "Record a receipt of every model call (turns, drop-in, summarizer, librarian, "
        "expansion): a compact manifest of what was sent, replayable byte for byte.",
    ),
    Setting(
        "LCM_RECEIPT_PRICES",
        str,
        "",
        "Price table for receipts' costs, USD per million tokens: `model-prefix=input/output"
        "[/cache_read[/cache_write]]` entries separated by `;` (longest prefix wins; cache "
        "prices default to the provider's multipliers). Empty: receipts show no cost.",
    ),
    Setting(
        "LCM_DROPIN_UNLISTED_CONTEXT_LIMIT",
        int,
        200_000,
        "Context window assumed for a model name the configuration does not list, passed "
        "on its own wire to that wire's upstream (e.g. Claude Code's claude-opus-4-8 on "
        "/anthropic): past it minus max_tokens, the assembled context is sent.",
        minimum=1024,
    ),
    Setting(
        "LCM_DROPIN_CLIENT_CREDENTIALS",
        bool,
        True,
        "Let a drop-in client that names its LCM user by `X-LCM-Token` send its own upstream "
        "credential (x-api-key or Authorization), forwarded upstream unchanged and never "
        "stored; false refuses such requests (server-held keys only).",
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
