from django.apps import AppConfig


class SecurityConfig(AppConfig):
    name = "security"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from lcmsite import crypto
        from security import signals  # noqa: F401  (audits admin sign-ins and changes)
        from security.throttling import validate_rates

        crypto.validate_configuration()  # a malformed key stops start-up, naming the variable
        validate_rates()
