from django.apps import AppConfig


class SecurityConfig(AppConfig):
    name = "security"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        from conversations.models import Message
        from core import crypto
        from core.admin_base import extend_admin
        from core.audit import register_audit_writer
        from integrity.part_readers import register_part_reader
        from security import signals  # noqa: F401  (audits admin sign-ins and changes)
        from security.metrics_guard import validate_metrics_guard
        from security.reconcile import ensure_schedule, install_worker_hooks
        from security.redaction.plan import part_ordinals
        from security.redaction_admin import redact_messages
        from security.services import audit_record
        from security.throttling import validate_rates

        extend_admin(Message, actions=[redact_messages])  # docs/security.md, "Redaction"
        register_audit_writer(audit_record)  # the lower apps' audited actions land here
        register_part_reader("security.redaction_forms", part_ordinals)
        # Redactions and exports run in the background worker (docs/security.md).
        post_migrate.connect(ensure_schedule, sender=self)
        install_worker_hooks()

        crypto.validate_configuration()  # a malformed key stops start-up, naming the variable
        validate_rates()
        validate_metrics_guard()
