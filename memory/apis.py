"""The memory API: manual retrieval and the chunk browser of a branch (owner-scoped)."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.errors import InvalidInput
from memory import serializers
from memory.recall import items_from_units, search_units
from memory.selectors import branch_chunks
from memory.turn_retrieval import scope_for_branch
from turns.selectors import branch_get_for_user

MAX_CHUNK_LIST = 200


class BranchRetrieveApi(APIView):
    @extend_schema(
        operation_id="branches_retrieve_memory",
        request=serializers.MemoryRetrieveInputSerializer,
        responses=serializers.MemoryRetrieveResponseSerializer,
        description=(
            "Search over the branch's ancestry (its own turns and its parents' up to the "
            "fork point), ranked as grep's semantic/hybrid modes rank (no similarity "
            "threshold, recency boost or MMR: those are a turn's own filters): chunks with "
            "their similarity, fused score, provenance and date (`provenance.created_at`). "
            "Pass chosen chunk ids as `attach_chunk_ids` when creating the next turn to put "
            "them first in its context."
        ),
    )
    def post(self, request, branch_id: str):
        body = serializers.MemoryRetrieveInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        branch = branch_get_for_user(user=request.user, branch_id=branch_id)
        # Search, not injection: the ranking of memory.recall alone (docs/memory.md).
        result = search_units(
            scope=scope_for_branch(branch),
            query=data["query"],
            k=data.get("top_k") or settings.LCM_RETRIEVAL_TOP_K,
            mode=data.get("mode") or "hybrid",
        )
        results = [item.as_dict() for item in items_from_units(result.hits)]
        return Response({"results": results, "stats": result.stats})


class BranchChunksApi(APIView):
    @extend_schema(
        operation_id="branches_chunks_list",
        parameters=[
            OpenApiParameter("q", str, description="Full-text filter (any word)."),
            OpenApiParameter(
                "limit",
                {"type": "integer", "minimum": 1, "maximum": MAX_CHUNK_LIST},
                description=f"1 to {MAX_CHUNK_LIST}, default 50.",
            ),
        ],
        responses=serializers.MemoryChunkListResponseSerializer,
        description="The chunks a branch can retrieve, newest first (or best match with q).",
    )
    def get(self, request, branch_id: str):
        branch = branch_get_for_user(user=request.user, branch_id=branch_id)
        raw_limit = request.query_params.get("limit", "50")
        try:
            limit = int(raw_limit)
        except ValueError:
            limit = 0
        if not 1 <= limit <= MAX_CHUNK_LIST:
            raise InvalidInput(
                f"limit must be an integer from 1 to {MAX_CHUNK_LIST}", extra={"field": "limit"}
            )
        chunks = branch_chunks(branch=branch, q=request.query_params.get("q", ""), limit=limit)
        return Response(
            {
                "results": [
                    {
                        "id": c.pk,
                        "chunk_type": c.chunk_type,
                        "summary": c.summary,
                        "text": c.rendered_text,
                        "tokens": c.token_est,
                        "conversation_id": c.conversation_id,
                        "source_turn_id": c.source_turn_id,
                        "seq_start": c.seq_start,
                        "seq_end": c.seq_end,
                        "created_at": c.source_created_at,
                    }
                    for c in chunks
                ]
            }
        )
