from django.apps import AppConfig


class CoreConfig(AppConfig):
    """The kernel: API plumbing, settings parsing, metrics, ids, tokens, crypto, progress,
    storage helpers, locks and leases. It imports no app of this project (docs/architecture.md);
    its commands (`lcm_serve`, `lcm_settings`) are the project's own."""

    name = "core"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Kernel"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created

        from core import checks  # noqa: F401  (registers the system checks)
        from core.sqlite_setup import auto_vacuum_on_new_file

        connection_created.connect(auto_vacuum_on_new_file, dispatch_uid="lcm_auto_vacuum")
