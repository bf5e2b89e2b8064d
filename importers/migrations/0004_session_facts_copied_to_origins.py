"""Copy what the coding agents said about their sessions (agent, version, cwd, git branch,
model, times) from the import rows to conversations.ConversationOrigin, which grep's
filters and provenance read (the importers keep writing both: importers.session_facts)."""

from django.db import migrations

FIELDS = ("agent", "agent_version", "cwd", "git_branch", "model", "started_at", "ended_at")
BATCH = 500


def copy_forward(apps, schema_editor):
    imported = apps.get_model("importers", "ImportedConversation")
    origin = apps.get_model("conversations", "ConversationOrigin")
    rows = imported.objects.exclude(agent="").order_by("conversation_id")
    batch = []
    for row in rows.iterator(chunk_size=BATCH):
        values = {name: getattr(row, name) for name in FIELDS}
        batch.append(origin(conversation_id=row.conversation_id, **values))
        if len(batch) >= BATCH:
            origin.objects.bulk_create(batch, ignore_conflicts=True)
            batch = []
    if batch:
        origin.objects.bulk_create(batch, ignore_conflicts=True)


def copy_backward(apps, schema_editor):
    apps.get_model("conversations", "ConversationOrigin").objects.all().delete()


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0009_conversation_origin"),
        ("importers", "0003_agent_sessions"),
    ]

    operations = [migrations.RunPython(copy_forward, copy_backward)]
