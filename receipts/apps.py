from django.apps import AppConfig


class ReceiptsConfig(AppConfig):
    name = "receipts"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Context receipts"

    def ready(self) -> None:
        # Every model call the providers layer makes is recorded (docs/receipts.md).
        from providers.observe import register_call_observer
        from receipts.item_readers import read_messages
        from receipts.items import register_item_reader
        from receipts.recording import OBSERVER

        register_call_observer(OBSERVER)
        register_item_reader("message", read_messages)
