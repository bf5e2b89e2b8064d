from django.apps import AppConfig


class IntegrityConfig(AppConfig):
    name = "integrity"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from core.metrics import register_collector
        from integrity.metrics import collect

        register_collector(collect)
