from django.apps import AppConfig


class CompactionConfig(AppConfig):
    name = "compaction"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from compaction.admin_actions import compact_now
        from compaction.metrics import collect
        from compaction.receipt_items import read_summaries
        from compaction.services import schedule_after_append
        from conversations.models import Conversation
        from conversations.services import register_after_append
        from core.admin_base import extend_admin
        from core.metrics import register_collector
        from receipts.items import register_item_reader

        register_item_reader(
            "summary", read_summaries
        )  # receipts name summaries (docs/receipts.md)
        register_collector(collect)
        register_after_append(schedule_after_append)
        extend_admin(Conversation, actions=[compact_now])  # "Compact now" in the store's admin
