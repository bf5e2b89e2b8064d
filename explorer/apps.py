from django.apps import AppConfig


class ExplorerConfig(AppConfig):
    """Server-rendered pages: conversation list, context view, timeline, summary DAG, search."""

    name = "explorer"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from conversations.models import Conversation, Summary
        from core.admin_base import extend_admin
        from explorer.admin_links import conversation_links, file_links, summary_links
        from explorer.selectors import timeline_part_ordinals
        from integrity.part_readers import register_part_reader
        from largefiles.models import LargeFile

        # The admin's pages link into the explorer's (registered here: the admin of the
        # store and of large files does not import the explorer).
        extend_admin(Conversation, columns=[conversation_links])
        extend_admin(Summary, columns=[summary_links])
        extend_admin(LargeFile, columns=[file_links])
        register_part_reader("explorer.timeline", timeline_part_ordinals)
