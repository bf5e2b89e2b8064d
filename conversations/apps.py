from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    name = "conversations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from conversations import checks  # noqa: F401  (registers the system checks)
        from conversations.metrics import collect
        from lcmsite.metrics import register_collector

        register_collector(collect)
