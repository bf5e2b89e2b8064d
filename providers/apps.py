from django.apps import AppConfig


class ProvidersConfig(AppConfig):
    name = "providers"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # A bad LCM_CONFIG_FILE (or model override) stops start-up naming the file and key.
        from providers import config

        config.check()
