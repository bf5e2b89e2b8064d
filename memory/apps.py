from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from compaction.store import register_after_summary
        from conversations.services import register_after_append
        from memory.indexing import schedule_after_append
        from memory.summaries import schedule_after_summary

        # API-ingested messages get chunked and embedded by a background job; so do the
        # summaries a compaction commits (grep's semantic and hybrid modes search them).
        register_after_append(schedule_after_append)
        register_after_summary(schedule_after_summary)
