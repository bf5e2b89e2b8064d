from django.apps import AppConfig


class ImportersConfig(AppConfig):
    name = "importers"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Imports and exports"
