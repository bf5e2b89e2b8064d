from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    name = "conversations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from conversations.metrics import collect
        from lcmsite.metrics import register_collector

        register_collector(collect)
