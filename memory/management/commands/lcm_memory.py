"""Semantic memory housekeeping: namespaces and their re-index progress, re-indexing."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from memory.embeddings import active_backend
from memory.models import Chunk, EmbeddingNamespace
from memory.namespaces import model_change_start
from memory.reindex import reindex_namespace


class Command(BaseCommand):
    help = (
        "Show the embedding namespaces (model, dimension, status, re-index progress) and the "
        "configured model; `reindex` starts (or with --wait runs here) the re-index into the "
        "configured model when it differs from the active one. See docs/memory.md."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "action",
            nargs="?",
            default="status",
            choices=["status", "reindex"],
            help="status (default) or reindex",
        )
        parser.add_argument(
            "--wait", action="store_true", help="reindex: run it in this process, not the worker"
        )

    def handle(self, *args, action: str, wait: bool, **options):
        if action == "reindex":
            namespace = model_change_start()
            if namespace is None:
                self.stdout.write("the configured model is already the active one")
            elif wait:
                done = reindex_namespace(namespace_id=namespace.pk)
                self.stdout.write(f"{done.model}/{done.dim}: {done.status}, {done.progress:.0%}")
            else:
                self.stdout.write(f"re-index of {namespace.model}/{namespace.dim} queued")
            return
        backend = active_backend()
        self.stdout.write(f"configured model: {backend.name}/{backend.dim}")
        self.stdout.write(f"chunks: {Chunk.objects.count()}")
        for ns in EmbeddingNamespace.objects.order_by("pk"):
            self.stdout.write(
                f"{ns.pk}: {ns.model}/{ns.dim} {ns.status} "
                f"{ns.chunks_done}/{ns.chunks_total} ({ns.progress:.0%})"
            )
