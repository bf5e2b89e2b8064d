from django.apps import AppConfig


class TurnsConfig(AppConfig):
    name = "turns"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Turn engine"

    def ready(self):
        from django.db.models.signals import post_migrate

        from core.metrics import register_collector
        from turns.metrics import collect
        from turns.reconcile import ensure_schedule, install_worker_hooks

        register_collector(collect)
        post_migrate.connect(ensure_schedule, sender=self)
        install_worker_hooks()

        from core import lifecycle
        from turns import runner

        # The web server finishes what a crash left (journals, commits, indexing) as it
        # starts, and ends its own streams cleanly as it stops (lcm_serve).
        lifecycle.on_server_start(_reconcile_at_start)
        lifecycle.on_server_stop(runner.shutdown)


def _reconcile_at_start() -> None:
    from turns.reconcile import reconcile

    reconcile()
