from django.apps import AppConfig


class IntegrityConfig(AppConfig):
    name = "integrity"
    default_auto_field = "django.db.models.BigAutoField"
