from django.apps import AppConfig


class RetrievalConfig(AppConfig):
    name = "retrieval"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from core.metrics import register_collector
        from retrieval.metrics import collect

        register_collector(collect)
