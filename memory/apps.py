from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from conversations.services import register_after_append
        from memory.indexing import schedule_after_append

        # API-ingested messages get chunked and embedded by a background job.
        register_after_append(schedule_after_append)
