"""Semantic memory housekeeping: namespaces and their re-index progress, re-indexing,
summary indexing."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from core.progress import progress
from memory.embeddings import active_backend
from memory.models import Chunk, EmbeddingNamespace, NamespaceStatus
from memory.namespaces import model_change_start
from memory.reindex import reindex_namespace
from memory.summaries import index_summaries


class Command(BaseCommand):
    help = (
        "Show the embedding namespaces (model, dimension, status, re-index progress) and the "
        "configured model. `reindex` starts the re-index into the configured model when it "
        "differs from the active one (queued for the worker; with --wait it runs here with a "
        "progress bar, and a stopped re-index resumes where it was). `index-summaries` "
        "embeds every summary that has no vector yet (e.g. after an import). Searches keep "
        "using the active model until a re-index completes. See docs/memory.md."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "action",
            nargs="?",
            default="status",
            choices=["status", "reindex", "index-summaries"],
            help="status (default), reindex or index-summaries",
        )
        parser.add_argument(
            "--wait", action="store_true", help="reindex: run it in this process, not the worker"
        )
        parser.add_argument(
            "--batch", type=int, default=256, help="reindex: chunks embedded per batch"
        )

    def handle(self, *args, action: str, wait: bool, batch: int, **options):
        if action == "index-summaries":
            written = index_summaries()
            self.stdout.write(f"summary vectors written: {written}")
            return
        if action == "reindex":
            self._reindex(wait=wait, batch=batch)
            return
        backend = active_backend()
        self.stdout.write(f"configured model: {backend.name}/{backend.dim}")
        self.stdout.write(f"chunks: {Chunk.objects.count()}")
        for ns in EmbeddingNamespace.objects.order_by("pk"):
            self.stdout.write(
                f"{ns.pk}: {ns.model}/{ns.dim} {ns.status} "
                f"{ns.chunks_done}/{ns.chunks_total} ({ns.progress:.0%})"
            )

    def _reindex(self, *, wait: bool, batch: int) -> None:
        namespace = model_change_start() if not wait else _building_or_start()
        if namespace is None:
            self.stdout.write("the configured model is already the active one")
            return
        if not wait:
            self.stdout.write(f"re-index of {namespace.model}/{namespace.dim} queued")
            return
        from conversations.models import Summary

        total = Chunk.objects.count() + Summary.objects.count()
        with progress(
            total=total, desc=f"Re-indexing into {namespace.model}", stream=self.stderr
        ) as bar:
            seen = {"done": 0}

            def advance(ns: EmbeddingNamespace) -> None:
                # the first call says how much an earlier, stopped run had done
                bar.advance(max(0, ns.chunks_done - seen["done"]))
                seen["done"] = ns.chunks_done

            done = reindex_namespace(namespace_id=namespace.pk, batch=batch, on_batch=advance)
        self.stdout.write(f"{done.model}/{done.dim}: {done.status}, {done.progress:.0%}")


def _building_or_start() -> EmbeddingNamespace | None:
    """The namespace to build here, without queueing a worker job for it as well."""
    from memory.namespaces import ensure_building, search_namespace

    backend = active_backend()
    active = search_namespace()
    if backend.name == active.model and backend.dim == active.dim:
        return None
    namespace = ensure_building(backend)
    if namespace.status != NamespaceStatus.BUILDING:
        return None
    return namespace
