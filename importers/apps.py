from django.apps import AppConfig


class ImportersConfig(AppConfig):
    name = "importers"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Imports and exports"

    def ready(self) -> None:
        from importers.exporters import part_ordinals
        from integrity.part_readers import register_part_reader

        register_part_reader("importers.exporters", part_ordinals)
