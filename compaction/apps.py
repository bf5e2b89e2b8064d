from django.apps import AppConfig


class CompactionConfig(AppConfig):
    name = "compaction"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from compaction.metrics import collect
        from compaction.services import schedule_after_append
        from conversations.services import register_after_append
        from lcmsite.metrics import register_collector

        register_collector(collect)
        register_after_append(schedule_after_append)
