from django.apps import AppConfig


class IntegrityConfig(AppConfig):
    name = "integrity"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from integrity.metrics import collect
        from lcmsite.metrics import register_collector

        register_collector(collect)
