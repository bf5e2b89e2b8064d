"""Semantic memory (SRD 5.8, 8, 9, 16.2): chunks, their vectors per embedding namespace,
what each turn retrieved, and where message indexing has got to.

The database enforces: one chunk per (source key, chunk type, content hash), one vector
per (chunk, namespace) and per (summary, namespace), one namespace per (model, dim), one retrieval row per (turn,
chunk). Migration 0002 makes chunks and vectors refuse UPDATE (they are immutable; a
model change writes a new namespace instead) and gives chunks a full-text index; 0005 lets
retention change exactly two columns of archived content: a vector's bytes (compressed) and
a chunk's `fulltext_dropped_at`; 0006 lets it move a chunk's text to the archive and back,
checked against its hash (docs/retention.md).
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from core.ids import new_id


class ChunkType(models.TextChoices):
    CODE = "code"
    EXPLANATION = "explanation"
    DECISION = "decision"
    USER_CONTEXT = "user_context"
    TOOL_RESULT = "tool_result"
    OTHER = "other"


class NamespaceStatus(models.TextChoices):
    BUILDING = "building"  # re-index in progress; not searched yet
    ACTIVE = "active"  # the one searches use
    RETIRED = "retired"  # an older model's vectors, kept but never searched


class EmbeddingNamespace(models.Model):
    """One embedding model + dimension. Searches read exactly one namespace."""

    model = models.CharField(max_length=255)
    dim = models.PositiveIntegerField()
    status = models.CharField(
        max_length=16, choices=NamespaceStatus.choices, default=NamespaceStatus.BUILDING
    )
    chunks_total = models.PositiveBigIntegerField(default=0)
    chunks_done = models.PositiveBigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["model", "dim"], name="namespace_model_dim_unique"),
            models.UniqueConstraint(
                fields=["status"],
                condition=Q(status="active"),
                name="namespace_one_active",
            ),
            models.CheckConstraint(
                condition=Q(status__in=NamespaceStatus.values), name="namespace_status_valid"
            ),
            models.CheckConstraint(condition=Q(dim__gte=1), name="namespace_dim_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.model}/{self.dim} ({self.status})"

    @property
    def progress(self) -> float:
        return 1.0 if not self.chunks_total else min(1.0, self.chunks_done / self.chunks_total)


class Chunk(models.Model):
    id = models.CharField(primary_key=True, max_length=26, default=new_id, editable=False)
    conversation = models.ForeignKey(
        "conversations.Conversation", on_delete=models.PROTECT, related_name="+"
    )
    # Set for chunks of a turn; null for plain API conversations.
    session = models.ForeignKey(
        "turns.Session", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    branch = models.ForeignKey(
        "turns.Branch", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    source_turn = models.ForeignKey(
        "turns.UserTurn", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    # "turn:<turn id>" or "msg:<conversation id>:<first seq>-<last seq>": the idempotency key
    # that works for both kinds of source (SRD 9.3's (source_turn, type, hash)).
    source_key = models.CharField(max_length=96)
    # The conversation messages the chunk was cut from (branch ancestry filters on these).
    seq_start = models.BigIntegerField()
    seq_end = models.BigIntegerField()
    # Character offsets into the source text (the messages joined by a blank line).
    start_offset = models.PositiveIntegerField()
    end_offset = models.PositiveIntegerField()
    chunk_type = models.CharField(max_length=16, choices=ChunkType.choices)
    rendered_text = models.TextField()
    summary = models.TextField()
    token_est = models.PositiveIntegerField()
    content_hash = models.CharField(max_length=64)  # SHA-256 hex of rendered_text
    source_created_at = models.DateTimeField()  # the newest source message (recency boost)
    created_at = models.DateTimeField(auto_now_add=True)
    # Set when retention dropped the chunk's full-text row (all its messages archived and
    # the policy drops them; memory.archived_content_policy): the one column an UPDATE may
    # change (migration 0005). Cleared again, and the row re-indexed, on restore.
    fulltext_dropped_at = models.DateTimeField(null=True, blank=True)
    # Set when retention moved the chunk's text to the archive (`archived_fulltext =
    # archive`): rendered_text and summary are empty and read back from the chunk's one
    # archived message (memory.archived_unit_text, migration 0006); cleared when they are
    # put back.
    text_archived_at = models.DateTimeField(null=True, blank=True)
    # True for a unit searched by its words only, never embedded (the middle of a long tool
    # result, memory.tool_output_policy); null for every other (migration 0007: nullable,
    # so adding it rewrites no table).
    lexical_only = models.BooleanField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["source_key", "chunk_type", "content_hash"], name="chunk_source_unique"
            ),
            models.CheckConstraint(
                condition=Q(chunk_type__in=ChunkType.values), name="chunk_type_valid"
            ),
            models.CheckConstraint(
                condition=Q(seq_end__gte=models.F("seq_start")), name="chunk_seq_order"
            ),
            models.CheckConstraint(
                condition=Q(end_offset__gte=models.F("start_offset")), name="chunk_offset_order"
            ),
        ]
        indexes = [
            models.Index(fields=["conversation", "seq_end"], name="chunk_conversation_seq"),
            models.Index(fields=["source_turn"], name="chunk_source_turn"),
        ]

    def __str__(self) -> str:
        return f"chunk {self.id} ({self.chunk_type})"


class ChunkVector(models.Model):
    """A chunk's embedding in one namespace: float32 little-endian bytes, L2-normalised, or,
    for archived content under a compressing retention policy, float16 or int8 with a
    header (memory.vectors.codec; read through `decode_vector`). The vector is the one
    column an UPDATE may change (migration 0005). The integer id is the stable row number
    an index maps back to the chunk (SRD 16.2)."""

    namespace = models.ForeignKey(EmbeddingNamespace, on_delete=models.PROTECT, related_name="+")
    chunk = models.ForeignKey(Chunk, on_delete=models.PROTECT, related_name="vectors")
    vector = models.BinaryField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["chunk", "namespace"], name="vector_chunk_ns_unique"),
        ]
        indexes = [models.Index(fields=["namespace", "id"], name="vector_namespace_id")]

    def __str__(self) -> str:
        return f"vector of {self.chunk_id} in namespace {self.namespace_id}"


class SummaryVector(models.Model):
    """A compaction summary's embedding in one namespace (grep's semantic and hybrid modes
    search summaries too). Written by `memory.summaries` after a compaction commits;
    float32 little-endian bytes, L2-normalised, immutable like ChunkVector."""

    namespace = models.ForeignKey(EmbeddingNamespace, on_delete=models.PROTECT, related_name="+")
    summary = models.ForeignKey("conversations.Summary", on_delete=models.PROTECT, related_name="+")
    vector = models.BinaryField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["summary", "namespace"], name="summary_vector_ns_unique"
            ),
        ]
        indexes = [models.Index(fields=["namespace", "id"], name="summary_vector_namespace_id")]

    def __str__(self) -> str:
        return f"vector of {self.summary_id} in namespace {self.namespace_id}"


class Retrieval(models.Model):
    """One chunk a turn's context retrieval selected (packed or not)."""

    turn = models.ForeignKey("turns.UserTurn", on_delete=models.PROTECT, related_name="+")
    chunk = models.ForeignKey(Chunk, on_delete=models.PROTECT, related_name="+")
    similarity = models.FloatField()
    score = models.FloatField()
    rank = models.PositiveIntegerField()
    packed = models.BooleanField()
    packed_as = models.CharField(max_length=16, blank=True, default="")  # full|summary|slice
    tokens = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["turn", "chunk"], name="retrieval_turn_chunk_unique"),
        ]

    def __str__(self) -> str:
        return f"retrieval of {self.chunk_id} for {self.turn_id} (rank {self.rank})"


class RetrievalStats(models.Model):
    """Per-turn retrieval figures (candidates, selected, similarity range, packed tokens)."""

    turn = models.OneToOneField(
        "turns.UserTurn", on_delete=models.PROTECT, primary_key=True, related_name="+"
    )
    namespace = models.CharField(max_length=300, blank=True, default="")
    disabled = models.BooleanField(default=False)
    error = models.TextField(blank=True, default="")
    candidates = models.PositiveIntegerField(default=0)
    selected = models.PositiveIntegerField(default=0)
    similarity_min = models.FloatField(null=True, blank=True)
    similarity_max = models.FloatField(null=True, blank=True)
    packed_tokens = models.PositiveIntegerField(default=0)
    elapsed_ms = models.FloatField(default=0.0)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"retrieval stats of {self.turn_id}"


class MessageIndexCursor(models.Model):
    """How far a conversation's API-ingested messages are chunked: advanced with
    compare-and-set in the same transaction as the chunks it covers."""

    conversation = models.OneToOneField(
        "conversations.Conversation", on_delete=models.PROTECT, primary_key=True, related_name="+"
    )
    last_seq = models.BigIntegerField(default=0)
    # Set when an indexing job is queued, cleared when one starts: appends in between
    # queue nothing more (one job catches them all up), so a busy conversation does not
    # flood the shared job queue.
    queued_at = models.DateTimeField(null=True, blank=True)
    # Held by the job indexing the conversation (renewed while it works), so two workers
    # never embed the same messages; once it lapses (a dead worker), the worker's own
    # reconciler queues the conversation again (memory.index_lag).
    lease_until = models.DateTimeField(null=True, blank=True)
    # When the conversation last fell behind (the first append not indexed since it was
    # caught up); cleared when a job catches it up. The lag metrics bound the oldest
    # unindexed message's age with it (a message's created_at may be an import's).
    behind_since = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"messages of {self.conversation_id} indexed to seq {self.last_seq}"
