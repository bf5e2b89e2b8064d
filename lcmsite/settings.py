"""Django settings, driven by environment variables (see core/config.py and the README)."""

from __future__ import annotations

import dataclasses
import os
import secrets
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

from core.config import SETTINGS_BY_NAME, load_lcm_settings
from core.object_storage import storages_setting

BASE_DIR = Path(__file__).resolve().parent.parent
env = environ.Env()

# --- LCM_* settings (core/config.py: names, defaults, ranges; README's table) -----------
# Every value load_lcm_settings() returns is a Django setting of the same name, assigned
# here by name so grep and IDEs find it (tests/test_settings.py keeps the list complete).
LCM = load_lcm_settings(os.environ)

# Core switches
LCM_ENABLED = LCM["LCM_ENABLED"]
LCM_AUTOCOMPACT_DISABLED = LCM["LCM_AUTOCOMPACT_DISABLED"]

# Budgets and thresholds
LCM_DEFAULT_TOKEN_BUDGET = LCM["LCM_DEFAULT_TOKEN_BUDGET"]
LCM_CONTEXT_THRESHOLD = LCM["LCM_CONTEXT_THRESHOLD"]
LCM_COMPACTION_LOW_WATER = LCM["LCM_COMPACTION_LOW_WATER"]
LCM_MAX_ACTIVE_MESSAGES = LCM["LCM_MAX_ACTIVE_MESSAGES"]
LCM_FRESH_TAIL_COUNT = LCM["LCM_FRESH_TAIL_COUNT"]
LCM_TAIL_TOOL_OUTPUT_MAX_TOKENS = LCM["LCM_TAIL_TOOL_OUTPUT_MAX_TOKENS"]
LCM_TAIL_MAX_TOKENS = LCM["LCM_TAIL_MAX_TOKENS"]
LCM_LEAF_TARGET_TOKENS = LCM["LCM_LEAF_TARGET_TOKENS"]
LCM_CONDENSED_TARGET_TOKENS = LCM["LCM_CONDENSED_TARGET_TOKENS"]
LCM_LEAF_CHUNK_TOKENS = LCM["LCM_LEAF_CHUNK_TOKENS"]
LCM_LEAF_MIN_FANOUT = LCM["LCM_LEAF_MIN_FANOUT"]
LCM_CONDENSED_MIN_FANOUT = LCM["LCM_CONDENSED_MIN_FANOUT"]
LCM_INCREMENTAL_MAX_DEPTH = LCM["LCM_INCREMENTAL_MAX_DEPTH"]
LCM_COMPACTION_MAX_PASSES = LCM["LCM_COMPACTION_MAX_PASSES"]
LCM_COMPACTION_MAX_SECONDS = LCM["LCM_COMPACTION_MAX_SECONDS"]
LCM_COMPACTION_MAX_ROUNDS = LCM["LCM_COMPACTION_MAX_ROUNDS"]

# Retrieval
LCM_MAX_EXPAND_TOKENS = LCM["LCM_MAX_EXPAND_TOKENS"]
LCM_GREP_TIMEOUT_MS = LCM["LCM_GREP_TIMEOUT_MS"]
LCM_EXPANSION_GRANT_TTL_SECONDS = LCM["LCM_EXPANSION_GRANT_TTL_SECONDS"]
LCM_EXPANSION_MAX_ANSWER_TOKENS = LCM["LCM_EXPANSION_MAX_ANSWER_TOKENS"]
LCM_EXPANSION_MAX_TOOL_CALLS = LCM["LCM_EXPANSION_MAX_TOOL_CALLS"]
LCM_EXPANSION_MODEL = LCM["LCM_EXPANSION_MODEL"]
LCM_EXPANSION_PROVIDER_MODEL = LCM["LCM_EXPANSION_PROVIDER_MODEL"]

# Large files
LCM_LARGE_FILE_TOKEN_THRESHOLD = LCM["LCM_LARGE_FILE_TOKEN_THRESHOLD"]
LCM_FILE_PREVIEW_BYTES = LCM["LCM_FILE_PREVIEW_BYTES"]

# Summarizer model
LCM_SUMMARY_MODEL = LCM["LCM_SUMMARY_MODEL"]
LCM_SUMMARY_PROVIDER_MODEL = LCM["LCM_SUMMARY_PROVIDER_MODEL"]
LCM_SUMMARY_TIMEOUT_SECONDS = LCM["LCM_SUMMARY_TIMEOUT_SECONDS"]
LCM_SUMMARY_MAX_RETRIES = LCM["LCM_SUMMARY_MAX_RETRIES"]
LCM_SUMMARY_MAX_CALLS = LCM["LCM_SUMMARY_MAX_CALLS"]
LCM_SUMMARY_MIN_FIDELITY = LCM["LCM_SUMMARY_MIN_FIDELITY"]
LCM_SUMMARY_MIN_RELATIONS = LCM["LCM_SUMMARY_MIN_RELATIONS"]
LCM_SUMMARY_CALL_WINDOW_SECONDS = LCM["LCM_SUMMARY_CALL_WINDOW_SECONDS"]
LCM_REPAIR_ENABLED = LCM["LCM_REPAIR_ENABLED"]
LCM_REPAIR_TOKEN_BUDGET = LCM["LCM_REPAIR_TOKEN_BUDGET"]
LCM_HANDOFF_RECENT_HOURS = LCM["LCM_HANDOFF_RECENT_HOURS"]
LCM_CIRCUIT_BREAKER_FAILURES = LCM["LCM_CIRCUIT_BREAKER_FAILURES"]
LCM_CIRCUIT_BREAKER_COOLDOWN_SECONDS = LCM["LCM_CIRCUIT_BREAKER_COOLDOWN_SECONDS"]

# Ingest and API
LCM_TOKEN_ESTIMATOR = LCM["LCM_TOKEN_ESTIMATOR"]
LCM_MAX_REQUEST_BYTES = LCM["LCM_MAX_REQUEST_BYTES"]
LCM_MAX_BATCH_MESSAGES = LCM["LCM_MAX_BATCH_MESSAGES"]

# Deployment
LCM_DATA_DIR = LCM["LCM_DATA_DIR"]
LCM_DATABASE_URL = LCM["LCM_DATABASE_URL"]
LCM_REDIS_URL = LCM["LCM_REDIS_URL"]
LCM_QUEUE_NAME = LCM["LCM_QUEUE_NAME"]

# Shared storage for several hosts (docs/deploy.md): an S3-compatible object store.
LCM_S3_BUCKET = LCM["LCM_S3_BUCKET"]
LCM_S3_ENDPOINT_URL = LCM["LCM_S3_ENDPOINT_URL"]
LCM_S3_REGION = LCM["LCM_S3_REGION"]
LCM_S3_PREFIX = LCM["LCM_S3_PREFIX"]
LCM_SECRET_KEY = LCM["LCM_SECRET_KEY"]
LCM_DEBUG = LCM["LCM_DEBUG"]
LCM_ALLOWED_HOSTS = LCM["LCM_ALLOWED_HOSTS"]
LCM_SQLITE_BUSY_TIMEOUT_MS = LCM["LCM_SQLITE_BUSY_TIMEOUT_MS"]
LCM_WORKERS = LCM["LCM_WORKERS"]
LCM_URGENT_WORKERS = LCM["LCM_URGENT_WORKERS"]
LCM_LOG_LEVEL = LCM["LCM_LOG_LEVEL"]

# Providers (docs/providers.md)
LCM_CONFIG_FILE = LCM["LCM_CONFIG_FILE"]
LCM_DEFAULT_MODEL = LCM["LCM_DEFAULT_MODEL"]
LCM_REDACTION_HOOK = LCM["LCM_REDACTION_HOOK"]
LCM_SECRET_POLICY = LCM["LCM_SECRET_POLICY"]
LCM_PROVIDER_MAX_RETRIES = LCM["LCM_PROVIDER_MAX_RETRIES"]
LCM_PROVIDER_TIMEOUT_SECONDS = LCM["LCM_PROVIDER_TIMEOUT_SECONDS"]

# Turn engine (turns/)
LCM_TURN_MAX_CONTENT_CHARS = LCM["LCM_TURN_MAX_CONTENT_CHARS"]
LCM_STATE_TARGET_TOKENS = LCM["LCM_STATE_TARGET_TOKENS"]
LCM_STATE_FOLD_TOKENS = LCM["LCM_STATE_FOLD_TOKENS"]
LCM_LIBRARIAN_MODEL = LCM["LCM_LIBRARIAN_MODEL"]
LCM_TURN_JOB_LEASE_SECONDS = LCM["LCM_TURN_JOB_LEASE_SECONDS"]
LCM_RECONCILE_INTERVAL_SECONDS = LCM["LCM_RECONCILE_INTERVAL_SECONDS"]

# Semantic memory (memory/, docs/memory.md)
LCM_EMBEDDING_BACKEND = LCM["LCM_EMBEDDING_BACKEND"]
LCM_EMBEDDING_MODEL = LCM["LCM_EMBEDDING_MODEL"]
LCM_VECTOR_INDEX = LCM["LCM_VECTOR_INDEX"]
LCM_VECTOR_CACHE_DTYPE = LCM["LCM_VECTOR_CACHE_DTYPE"]
LCM_MEMORY_INDEX_MESSAGES = LCM["LCM_MEMORY_INDEX_MESSAGES"]

# Search units and ranking (memory/recall.py, docs/memory.md "Recall")
LCM_MEMORY_UNIT_TOKENS = LCM["LCM_MEMORY_UNIT_TOKENS"]
LCM_MEMORY_INDEX_BATCH_CONVERSATIONS = LCM["LCM_MEMORY_INDEX_BATCH_CONVERSATIONS"]
LCM_MEMORY_INDEX_JOB_SECONDS = LCM["LCM_MEMORY_INDEX_JOB_SECONDS"]
LCM_MEMORY_INDEX_REQUEUE_SECONDS = LCM["LCM_MEMORY_INDEX_REQUEUE_SECONDS"]
LCM_MEMORY_EMBED_TOOL_RESULT_TOKENS = LCM["LCM_MEMORY_EMBED_TOOL_RESULT_TOKENS"]
LCM_SEARCH_BM25_WEIGHT = LCM["LCM_SEARCH_BM25_WEIGHT"]
LCM_SEARCH_NEIGHBOUR_WEIGHT = LCM["LCM_SEARCH_NEIGHBOUR_WEIGHT"]
LCM_SEARCH_MESSAGE_WEIGHT = LCM["LCM_SEARCH_MESSAGE_WEIGHT"]
LCM_SEARCH_LEXICAL_CONFIDENCE = LCM["LCM_SEARCH_LEXICAL_CONFIDENCE"]
LCM_SEARCH_PASSAGE_TOKENS = LCM["LCM_SEARCH_PASSAGE_TOKENS"]
LCM_SEARCH_SPEAKER_WEIGHT = LCM["LCM_SEARCH_SPEAKER_WEIGHT"]
LCM_CHUNK_MIN_TOKENS = LCM["LCM_CHUNK_MIN_TOKENS"]
LCM_CHUNK_MAX_TOKENS = LCM["LCM_CHUNK_MAX_TOKENS"]
LCM_CHUNK_OVERLAP_TOKENS = LCM["LCM_CHUNK_OVERLAP_TOKENS"]
LCM_CHUNK_TOPIC_SHIFT = LCM["LCM_CHUNK_TOPIC_SHIFT"]
LCM_RETRIEVAL_TOP_K = LCM["LCM_RETRIEVAL_TOP_K"]
LCM_RETRIEVAL_OVERFETCH_K = LCM["LCM_RETRIEVAL_OVERFETCH_K"]
LCM_RETRIEVAL_SIMILARITY_THRESHOLD = LCM["LCM_RETRIEVAL_SIMILARITY_THRESHOLD"]
LCM_RETRIEVAL_RECENCY_BOOST = LCM["LCM_RETRIEVAL_RECENCY_BOOST"]
LCM_RETRIEVAL_WINDOW_SHARE = LCM["LCM_RETRIEVAL_WINDOW_SHARE"]
LCM_TOOL_MAX_RESULT_CHARS = LCM["LCM_TOOL_MAX_RESULT_CHARS"]
LCM_TURN_MAX_STEPS = LCM["LCM_TURN_MAX_STEPS"]
LCM_TURN_THREADS = LCM["LCM_TURN_THREADS"]
LCM_OFFLINE_STREAM_CHUNKS = LCM["LCM_OFFLINE_STREAM_CHUNKS"]
LCM_OFFLINE_STREAM_DELAY_MS = LCM["LCM_OFFLINE_STREAM_DELAY_MS"]

# Security (SRD 14): encryption at rest, throttling
LCM_ENCRYPTION_KEY = LCM["LCM_ENCRYPTION_KEY"]
LCM_ENCRYPTION_OLD_KEYS = LCM["LCM_ENCRYPTION_OLD_KEYS"]
LCM_THROTTLE_USER_RATE = LCM["LCM_THROTTLE_USER_RATE"]
LCM_THROTTLE_IP_RATE = LCM["LCM_THROTTLE_IP_RATE"]
LCM_AUTH_FAILURE_RATE = LCM["LCM_AUTH_FAILURE_RATE"]
LCM_LOGIN_FAILURE_RATE = LCM["LCM_LOGIN_FAILURE_RATE"]

# /metrics guard (security/metrics_guard.py, docs/deploy.md)
LCM_METRICS_ALLOWED_NETWORKS = LCM["LCM_METRICS_ALLOWED_NETWORKS"]
LCM_METRICS_TOKEN = LCM["LCM_METRICS_TOKEN"]

# API tokens (tokens/, docs/tokens.md)
LCM_TOKEN_DEFAULT_DAYS = LCM["LCM_TOKEN_DEFAULT_DAYS"]
LCM_EXPORT_KEEP_HOURS = LCM["LCM_EXPORT_KEEP_HOURS"]

# Background job reliability (workers/, docs/reliability.md)
LCM_JOB_LEASE_SECONDS = LCM["LCM_JOB_LEASE_SECONDS"]
LCM_JOB_RECONCILE_SECONDS = LCM["LCM_JOB_RECONCILE_SECONDS"]
LCM_JOB_MAX_ATTEMPTS = LCM["LCM_JOB_MAX_ATTEMPTS"]
LCM_WORKER_STOP_SECONDS = LCM["LCM_WORKER_STOP_SECONDS"]

# Retention and archive segments (archive/, retention/, docs/retention.md)
LCM_ARCHIVE_CODEC = LCM["LCM_ARCHIVE_CODEC"]
LCM_ARCHIVE_SEGMENT_MESSAGES = LCM["LCM_ARCHIVE_SEGMENT_MESSAGES"]
LCM_ARCHIVE_CACHE_SECONDS = LCM["LCM_ARCHIVE_CACHE_SECONDS"]
LCM_ARCHIVE_CACHE_SEGMENTS = LCM["LCM_ARCHIVE_CACHE_SEGMENTS"]
LCM_GREP_ARCHIVE_SEGMENTS = LCM["LCM_GREP_ARCHIVE_SEGMENTS"]
LCM_GREP_ARCHIVE_CACHE_MB = LCM["LCM_GREP_ARCHIVE_CACHE_MB"]
LCM_RETENTION_ARCHIVE_AFTER_DAYS = LCM["LCM_RETENTION_ARCHIVE_AFTER_DAYS"]
LCM_RETENTION_KEEP_NEWEST_TOKENS = LCM["LCM_RETENTION_KEEP_NEWEST_TOKENS"]
LCM_RETENTION_DELETE_AFTER_DAYS = LCM["LCM_RETENTION_DELETE_AFTER_DAYS"]
LCM_RETENTION_ARCHIVED_VECTORS = LCM["LCM_RETENTION_ARCHIVED_VECTORS"]
LCM_RETENTION_ARCHIVED_FULLTEXT = LCM["LCM_RETENTION_ARCHIVED_FULLTEXT"]
LCM_RETENTION_BATCH_SEGMENTS = LCM["LCM_RETENTION_BATCH_SEGMENTS"]

# Drop-in endpoints (docs/drop-in.md)
LCM_DROPIN_MEMORY_TOOLS = LCM["LCM_DROPIN_MEMORY_TOOLS"]
LCM_RECEIPTS = LCM["LCM_RECEIPTS"]
LCM_RECEIPT_PRICES = LCM["LCM_RECEIPT_PRICES"]
LCM_DROPIN_UNLISTED_CONTEXT_LIMIT = LCM["LCM_DROPIN_UNLISTED_CONTEXT_LIMIT"]
LCM_DROPIN_CLIENT_CREDENTIALS = LCM["LCM_DROPIN_CLIENT_CREDENTIALS"]


DATA_DIR = Path(LCM_DATA_DIR)
if not DATA_DIR.is_absolute():
    DATA_DIR = (BASE_DIR / DATA_DIR).resolve()
DATA_DIR.mkdir(parents=True, exist_ok=True)


def _secret_key() -> str:
    if LCM_SECRET_KEY:
        return LCM_SECRET_KEY
    key_file = DATA_DIR / "secret_key"
    if not key_file.exists():
        key_file.write_text(secrets.token_urlsafe(50))
        key_file.chmod(0o600)
    return key_file.read_text().strip()


SECRET_KEY = _secret_key()
DEBUG = LCM_DEBUG
ALLOWED_HOSTS = [h.strip() for h in LCM_ALLOWED_HOSTS.split(",") if h.strip()]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "core",
    "tokens",  # hashed API tokens (docs/tokens.md)
    "workers",  # before django_q: its `qcluster` (bounded stop) wins
    "django_q",
    "conversations",
    "receipts",  # a receipt of every model call (docs/receipts.md)
    "largefiles",
    "archive",  # retention: archive segments (docs/retention.md)
    "compaction",
    "retrieval",
    "integrity",
    "importers",
    "providers",
    "turns",
    "memory",
    "explorer",
    "console",
    "mcpserver",
    "security",
    "retention",  # retention policies and jobs (docs/retention.md)
    "dropin",
]
# Benchmarks are measurement code, not product code: their app (the lcm_bench and lcm_eval
# commands, no models) is installed only when LCM_BENCHMARKS_APP=1, which manage.py sets
# for those two commands (its BENCHMARK_COMMANDS) and tests/settings.py sets always.
if os.environ.get("LCM_BENCHMARKS_APP") == "1":
    INSTALLED_APPS.append("benchmarks")

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "dropin.middleware.DropinBodyLimitMiddleware",  # the drop-in wires' own 413 shapes
    "core.api.middleware.RequestSizeLimitMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "security.throttling.LoginThrottleMiddleware",
    "security.throttling.AuthFailureThrottleMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "explorer.middleware.ContentSecurityPolicyMiddleware",
]

ROOT_URLCONF = "lcmsite.urls"
WSGI_APPLICATION = "lcmsite.wsgi.application"
ASGI_APPLICATION = "lcmsite.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Database --------------------------------------------------------------
# LCM_DATABASE_URL, then DATABASE_URL, then SQLite under the data directory.
_database_url = LCM_DATABASE_URL
if not _database_url and os.environ.get("DATABASE_URL"):
    # The fallback gets the same validation, under its own name.
    _fallback = dataclasses.replace(SETTINGS_BY_NAME["LCM_DATABASE_URL"], name="DATABASE_URL")
    _database_url = _fallback.parse(os.environ["DATABASE_URL"])
if _database_url:
    try:
        _db = env.db_url_config(_database_url)
    except Exception as exc:  # django-environ raises KeyError/ValueError on odd URLs
        raise ImproperlyConfigured(
            f"database URL {_database_url!r} cannot be parsed: {exc}"
        ) from None
else:
    _db = {"ENGINE": "django.db.backends.sqlite3", "NAME": str(DATA_DIR / "lcm.sqlite3")}

if _db["ENGINE"] == "django.db.backends.sqlite3":
    _db.setdefault("OPTIONS", {}).update(
        {
            # IMMEDIATE: a writer takes the write lock at BEGIN, so two writers queue on the
            # busy timeout instead of failing with "database is locked" on upgrade.
            "transaction_mode": "IMMEDIATE",
            "timeout": LCM_SQLITE_BUSY_TIMEOUT_MS / 1000,
            "init_command": (
                # A new file is made with auto_vacuum=INCREMENTAL (core/sqlite_setup.py).
                "PRAGMA journal_mode=WAL;"
                "PRAGMA synchronous=NORMAL;"
                f"PRAGMA busy_timeout={LCM_SQLITE_BUSY_TIMEOUT_MS};"
                "PRAGMA foreign_keys=ON;"
            ),
        }
    )
    # A file, not :memory:, so threads and the live server share one test database.
    _db["TEST"] = {"NAME": os.environ.get("LCM_TEST_DB_NAME") or str(DATA_DIR / "test_lcm.sqlite3")}
else:
    # 0, not persistent: under ASGI (lcm_serve) every request runs its sync view in a
    # fresh thread, and a persistent connection kept by a thread that is gone is never
    # reused nor closed; under load they pile up to PostgreSQL's max_connections ("too
    # many clients already"). Django's ASGI advice: no persistent connections.
    _db.setdefault("CONN_MAX_AGE", 0)
    _db["CONN_HEALTH_CHECKS"] = True
    if _db["CONN_MAX_AGE"] == 0:
        # A pool per process instead (psycopg_pool, Django's `pool` option): "closing"
        # at the end of a request hands the connection back, and the next request's
        # thread takes it, checked alive first (CONN_HEALTH_CHECKS). Without it every
        # request paid a new PostgreSQL connection, 3-17 ms on the 2-core machine: most
        # of one message's API time (docs/benchmarks.md, "Reference workload"). The
        # bound leaves room for every turn thread (each holds a connection for its turn)
        # plus 40 requests at once; past it, a request waits up to `timeout` seconds.
        # Idle connections above `min_size` are closed after `max_idle` seconds.
        _db.setdefault("OPTIONS", {}).setdefault(
            "pool",
            {
                "min_size": 1,
                "max_size": LCM_TURN_THREADS + 40,
                "timeout": 30,
                "max_idle": 300,
            },
        )

        def _forget_inherited_pools() -> None:
            """A forked child (qcluster's workers) must not use its parent's pooled
            sockets: it builds its own pool. The inherited ones are kept referenced, never
            closed, so garbage collection cannot end the parent's sessions."""
            import sys

            backend = sys.modules.get("django.db.backends.postgresql.base")
            if backend is not None and backend.DatabaseWrapper._connection_pools:
                _inherited_pools.append(dict(backend.DatabaseWrapper._connection_pools))
                backend.DatabaseWrapper._connection_pools.clear()

        _inherited_pools: list = []
        os.register_at_fork(after_in_child=_forget_inherited_pools)
    if os.environ.get("LCM_TEST_DB_NAME"):
        _db["TEST"] = {"NAME": os.environ["LCM_TEST_DB_NAME"]}
DATABASES = {"default": _db}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Background jobs (django-q2) -------------------------------------------
Q_CLUSTER = {
    # Processes that share the broker and this name share one queue (docs/deploy.md).
    "name": LCM_QUEUE_NAME,
    "workers": LCM_WORKERS,
    "timeout": LCM_COMPACTION_MAX_SECONDS + 60,
    "retry": LCM_COMPACTION_MAX_SECONDS + 120,
    "max_attempts": 3,
    "save_limit": 1000,
    "catch_up": False,
    "label": "Background jobs",
    # The urgent queue's cluster (core/job_queues.py): its own worker count. django-q2
    # applies it to a cluster started with Q_CLUSTER_NAME=<name>-urgent.
    "ALT_CLUSTERS": {
        f"{LCM_QUEUE_NAME}-urgent": {"workers": max(1, LCM_URGENT_WORKERS)},
    },
}
if LCM_REDIS_URL:
    Q_CLUSTER["redis"] = LCM_REDIS_URL
else:
    Q_CLUSTER["orm"] = "default"
    Q_CLUSTER["poll"] = 0.5

# --- Cache: rate-limit counters (security/throttling.py) ----------------------------------
# With Redis configured, every process counts in the same place, so limits are shared;
# without it, Django's per-process local-memory cache (the default).
if LCM_REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": LCM_REDIS_URL,
            "KEY_PREFIX": "lcm-cache",
        }
    }

# ContextItem's unique (conversation, ordinal) constraint INCLUDEs the columns assembly
# reads (an index-only scan on PostgreSQL). SQLite has no INCLUDE, so Django warns that it
# would not create the constraint; on SQLite the table keeps the plain unique constraint
# made by migration 0001 (0005 changes only the state there), and a test proves it holds.
SILENCED_SYSTEM_CHECKS = ["models.W039"]

# --- Files -----------------------------------------------------------------
MEDIA_ROOT = DATA_DIR / "files"


STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # large_files and stream_journals: under DATA_DIR, or in LCM_S3_BUCKET (docs/deploy.md).
    **storages_setting(lcm=LCM, data_dir=DATA_DIR),
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
STATIC_URL = "/static/"
STATIC_ROOT = DATA_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)  # whitenoise warns on every request when it is missing
STATICFILES_DIRS = [BASE_DIR / "static"] if (BASE_DIR / "static").is_dir() else []
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

# --- Auth and API ----------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
DATA_UPLOAD_MAX_MEMORY_SIZE = LCM_MAX_REQUEST_BYTES

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "tokens.authentication.ApiTokenAuthentication",  # hashed keys (docs/tokens.md)
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": ["core.api.parsers.StrictJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "core.api.errors.exception_handler",
    # Rates from LCM_THROTTLE_USER_RATE / LCM_THROTTLE_IP_RATE (security/throttling.py).
    "DEFAULT_THROTTLE_CLASSES": [
        "security.throttling.TokenRateThrottle",
        "security.throttling.IPRateThrottle",
    ],
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "LCM server API",
    "DESCRIPTION": "Lossless Context Management: store every message, compact history into a "
    "DAG of summaries, assemble a bounded context, and expand any summary back to its sources.",
    "VERSION": "1.0.0",
    # OpenAPI 3.1 (JSON Schema 2020-12): `propertyNames` can state that object keys hold
    # no NUL, as every string value already says (core/api/schema.py).
    "OAS_VERSION": "3.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # Error responses and closed request objects, stated once (core/api/schema.py).
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "core.api.schema.contract_hook",
    ],
    # Two endpoints take a "mode" with different choices: name each enum explicitly.
    "ENUM_NAME_OVERRIDES": {
        "CompactionModeEnum": "compaction.models.Mode",
        "IntegrityScanModeEnum": "integrity.models.ScanMode",
        "GrepModeEnum": ["full_text", "regex", "semantic", "hybrid"],
        "ToolNameEnum": "retrieval.serializers.TOOL_NAMES",
        # The compaction and import jobs' states keep the name they had alone.
        "StateEnum": "compaction.models.JobState",
        "RedactionStateEnum": "security.models.RedactionState",
        "ExportStateEnum": "security.models.ExportState",
    },
}

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {
        "lcm": {"handlers": ["console"], "level": LCM_LOG_LEVEL, "propagate": False},
        # django-q2 logs as "django-q" (an INFO line per enqueued task: one per ingested
        # message, 2 ms each to a busy terminal).
        "django-q": {"handlers": ["console"], "level": "WARNING", "propagate": False},
    },
}
