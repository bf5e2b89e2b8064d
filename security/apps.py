from django.apps import AppConfig


class SecurityConfig(AppConfig):
    name = "security"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from core import crypto
        from core.audit import register_audit_writer
        from security import signals  # noqa: F401  (audits admin sign-ins and changes)
        from security.metrics_guard import validate_metrics_guard
        from security.services import audit_record
        from security.throttling import validate_rates

        register_audit_writer(audit_record)  # the lower apps' audited actions land here
        _add_hard_delete_endpoints()

        crypto.validate_configuration()  # a malformed key stops start-up, naming the variable
        validate_rates()
        validate_metrics_guard()


def _add_hard_delete_endpoints() -> None:
    from conversations.apis import ConversationDetailApi
    from core.api.views import add_view_method
    from security.apis import conversation_hard_delete, session_hard_delete
    from turns.apis import SessionDetailApi

    add_view_method(ConversationDetailApi, "delete", conversation_hard_delete)
    add_view_method(SessionDetailApi, "delete", session_hard_delete)
