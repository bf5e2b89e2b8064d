from django.apps import AppConfig


class ExplorerConfig(AppConfig):
    """Server-rendered pages: conversation list, context view, timeline, summary DAG, search."""

    name = "explorer"
    default_auto_field = "django.db.models.BigAutoField"
