from django.apps import AppConfig


class LargeFilesConfig(AppConfig):
    name = "largefiles"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Large files"

    def ready(self) -> None:
        from conversations.interception import register_interceptor
        from largefiles.ingest import intercept

        register_interceptor(intercept)  # large blocks are set aside at every append
