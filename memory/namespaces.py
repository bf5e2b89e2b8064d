"""Embedding namespaces: which model's vectors searches read, and model changes.

Exactly one namespace is `active` (a partial unique constraint). When the configured
backend's model differs from the active namespace's, a `building` namespace for the new
model is created and a re-index job fills it in the background (with progress); searches
keep reading the active namespace, embedding queries with its own model, until the new one
is complete and swapped in by one transaction. Vectors of two models are never mixed.
"""

from __future__ import annotations

import logging

from django.db import IntegrityError, transaction

from core.job_queues import enqueue
from memory.embeddings import EmbeddingBackend, active_backend, backend_for
from memory.models import EmbeddingNamespace, NamespaceStatus

logger = logging.getLogger("lcm.memory")

REINDEX_TASK = "memory.tasks.reindex_namespace"


def backend_for_namespace(namespace: EmbeddingNamespace) -> EmbeddingBackend:
    """The backend that made a namespace's vectors (queries must use the same one)."""
    name = namespace.model
    if name.startswith("openai:"):
        return backend_for("openai", name.split(":", 1)[1])
    if name.startswith("hashing-v1-"):
        return backend_for("hashing", name.rsplit("-", 1)[1])
    if name == "all-MiniLM-L6-v2":
        return backend_for("minilm", "fp32")  # numpy's vectors (numpy without the runtime)
    if name.startswith("all-MiniLM-L6-v2-"):  # a quantized graph: all-MiniLM-L6-v2-int8
        return backend_for("minilm", name.rsplit("-", 1)[1])
    return backend_for("static", "")


def _get_or_create(model: str, dim: int, status: str) -> EmbeddingNamespace:
    existing = EmbeddingNamespace.objects.filter(model=model, dim=dim).first()
    if existing is not None:
        return existing
    try:
        with transaction.atomic():
            return EmbeddingNamespace.objects.create(model=model, dim=dim, status=status)
    except IntegrityError:  # a concurrent creator won, or another namespace is active
        existing = EmbeddingNamespace.objects.filter(model=model, dim=dim).first()
        if existing is not None:
            return existing
        return EmbeddingNamespace.objects.create(
            model=model, dim=dim, status=NamespaceStatus.BUILDING
        )


def search_namespace() -> EmbeddingNamespace:
    """The namespace searches read. The first use creates it for the configured model."""
    active = EmbeddingNamespace.objects.filter(status=NamespaceStatus.ACTIVE).first()
    if active is not None:
        return active
    backend = active_backend()
    return _get_or_create(backend.name, backend.dim, NamespaceStatus.ACTIVE)


def write_namespaces() -> list[EmbeddingNamespace]:
    """Namespaces new chunks are embedded into: the active one and, during a model change,
    the one being built (so it is complete when it is swapped in)."""
    active = search_namespace()
    backend = active_backend()
    namespaces = [active]
    if backend.name != active.model or backend.dim != active.dim:
        existed = EmbeddingNamespace.objects.filter(model=backend.name, dim=backend.dim).exists()
        building = ensure_building(backend)
        if not existed:  # the first sight of a model change: start the re-index
            _enqueue_reindex(building.pk)
        namespaces.append(building)
    return namespaces


def _enqueue_reindex(namespace_id: int) -> None:
    transaction.on_commit(lambda: enqueue(REINDEX_TASK, namespace_id))


def ensure_building(backend: EmbeddingBackend) -> EmbeddingNamespace:
    namespace = _get_or_create(backend.name, backend.dim, NamespaceStatus.BUILDING)
    if namespace.status == NamespaceStatus.RETIRED:  # back to an older model: rebuild it
        EmbeddingNamespace.objects.filter(pk=namespace.pk).update(status=NamespaceStatus.BUILDING)
        namespace.status = NamespaceStatus.BUILDING
    return namespace


def model_change_start() -> EmbeddingNamespace | None:
    """If the configured model is not the active one, make sure its namespace is being
    built and a re-index job is queued; returns that namespace (None: nothing to do).
    Indexing new chunks does this on its own the first time it sees the change; the
    `lcm_memory reindex` command calls it to restart a stopped re-index."""
    backend = active_backend()
    active = search_namespace()
    if backend.name == active.model and backend.dim == active.dim:
        return None
    namespace = ensure_building(backend)
    _enqueue_reindex(namespace.pk)
    return namespace


def activate(namespace_id: int) -> None:
    """Swap a completed namespace in: the old active one retires, in one transaction."""
    with transaction.atomic():
        EmbeddingNamespace.objects.filter(status=NamespaceStatus.ACTIVE).exclude(
            pk=namespace_id
        ).update(status=NamespaceStatus.RETIRED)
        EmbeddingNamespace.objects.filter(pk=namespace_id).update(status=NamespaceStatus.ACTIVE)
    logger.info("embedding namespace %s is now active", namespace_id)
