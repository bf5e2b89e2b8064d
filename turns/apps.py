from django.apps import AppConfig


class TurnsConfig(AppConfig):
    name = "turns"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Turn engine"

    def ready(self):
        # Imported here, not at the top: these modules import the models, which Django
        # loads only after every AppConfig is created.
        from django.db.models.signals import post_migrate

        from compaction.services import register_autocompact_exemption
        from core import lifecycle
        from core.metrics import register_collector
        from receipts.items import register_item_reader
        from turns import runner
        from turns.metrics import collect
        from turns.mirror import summaries_never_sent
        from turns.receipt_items import read_states
        from turns.reconcile import ensure_schedule, install_worker_hooks, reconcile

        register_item_reader("state", read_states)  # states named in receipts (docs/receipts.md)
        register_collector(collect)
        # A `state` session's mirror is never sent as summaries: no automatic compaction.
        register_autocompact_exemption(summaries_never_sent)
        post_migrate.connect(ensure_schedule, sender=self)
        install_worker_hooks()
        # The web server finishes what a crash left (journals, commits, indexing) as it
        # starts, and ends its own streams cleanly as it stops (lcm_serve).
        lifecycle.on_server_start(reconcile)
        lifecycle.on_server_stop(runner.shutdown)
