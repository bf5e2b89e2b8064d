from django.apps import AppConfig


class DropinConfig(AppConfig):
    name = "dropin"
    verbose_name = "Drop-in OpenAI and Anthropic endpoints"
    default_auto_field = "django.db.models.BigAutoField"
