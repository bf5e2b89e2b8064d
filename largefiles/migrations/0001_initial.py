"""The large-file table moves from the conversations app to its own app: state only.

The table (`conversations_largefile`), its constraints, index and triggers stay exactly
as conversations 0001-0003 made them; no row is copied. This migration adds the model to
this app's state, conversations 0007 removes it from that app's state, and importers 0002
points ImportedFile's key at the new state. The content type row is renamed so admin
permissions and log entries keep pointing at the same model.
"""

import django.db.models.deletion
from django.db import migrations, models


def _rename_content_type(apps, schema_editor, old: str, new: str) -> None:
    ContentType = apps.get_model("contenttypes", "ContentType")
    db = schema_editor.connection.alias
    if not ContentType.objects.using(db).filter(app_label=new, model="largefile").exists():
        ContentType.objects.using(db).filter(app_label=old, model="largefile").update(
            app_label=new
        )


def forwards(apps, schema_editor):
    _rename_content_type(apps, schema_editor, "conversations", "largefiles")


def backwards(apps, schema_editor):
    _rename_content_type(apps, schema_editor, "largefiles", "conversations")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("conversations", "0006_cjk_triggers_skip_ascii"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="LargeFile",
                    fields=[
                        ("id", models.CharField(max_length=32, primary_key=True, serialize=False)),
                        ("file_name", models.TextField(blank=True, default="")),
                        ("mime_type", models.CharField(blank=True, default="", max_length=255)),
                        ("byte_size", models.PositiveBigIntegerField()),
                        ("line_count", models.PositiveBigIntegerField(default=0)),
                        ("token_count", models.PositiveBigIntegerField(default=0)),
                        ("sha256", models.CharField(max_length=64)),
                        ("storage_key", models.TextField()),
                        ("exploration_summary", models.TextField(blank=True, default="")),
                        ("tool_name", models.CharField(blank=True, default="", max_length=255)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "conversation",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="large_files",
                                to="conversations.conversation",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "conversations_largefile",
                        "indexes": [
                            models.Index(
                                fields=["conversation", "created_at"],
                                name="large_file_conv_created",
                            )
                        ],
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("conversation", "sha256"),
                                name="large_file_content_unique",
                            ),
                            models.CheckConstraint(
                                condition=models.Q(("id__startswith", "file_")),
                                name="large_file_id_prefixed",
                            ),
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(forwards, backwards),
    ]
