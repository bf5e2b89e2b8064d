from django.apps import AppConfig


class WorkersConfig(AppConfig):
    """Background-job reliability: job leases, the job reconciler, and a `qcluster` that
    stops within LCM_WORKER_STOP_SECONDS of SIGTERM (listed before django_q so its
    `qcluster` command wins)."""

    name = "workers"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Background workers"

    def ready(self):
        from django.db.models.signals import post_migrate

        from workers.reconcile import ensure_schedule, install_worker_hooks

        post_migrate.connect(ensure_schedule, sender=self)
        install_worker_hooks()
