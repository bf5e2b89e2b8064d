from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    name = "conversations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created

        from conversations.metrics import collect
        from conversations.search import grams
        from core.metrics import register_collector

        register_collector(collect)
        # SQLite's gram-index triggers call lcm_cjk_grams (migration 0004).
        connection_created.connect(grams.register, dispatch_uid="lcm_cjk_grams")
