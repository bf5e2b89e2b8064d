from django.apps import AppConfig


class ArchiveConfig(AppConfig):
    name = "archive"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Archive segments"

    def ready(self) -> None:
        from archive.selectors import archived_forms
        from conversations.archive_port import register_archive_reader

        register_archive_reader(archived_forms)
