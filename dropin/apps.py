from django.apps import AppConfig


class DropinConfig(AppConfig):
    name = "dropin"
    verbose_name = "Drop-in OpenAI and Anthropic endpoints"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from core import lifecycle
        from dropin.recovery import recover_journals

        # Streams cut by a crash: their partial answers are stored as the server starts.
        lifecycle.on_server_start(recover_journals)
