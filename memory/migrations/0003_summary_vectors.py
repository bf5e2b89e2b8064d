"""Summary vectors (grep semantic/hybrid over summaries); immutable like chunk vectors."""

import django.db.models.deletion
from django.db import migrations, models

PG = (
    "CREATE TRIGGER memory_summaryvector_immutable BEFORE UPDATE ON memory_summaryvector "
    "FOR EACH ROW EXECUTE FUNCTION lcm_memory_refuse_update()"
)
SQLITE = """CREATE TRIGGER memory_summaryvector_immutable BEFORE UPDATE ON memory_summaryvector
    BEGIN SELECT RAISE(ABORT, 'memory_summaryvector rows are immutable'); END"""


def forward(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    schema_editor.execute(PG if vendor == "postgresql" else SQLITE, params=None)


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0003_immutable_canonical_rows"),
        ("memory", "0002_immutable_rows_and_search"),
    ]

    operations = [
        migrations.CreateModel(
            name="SummaryVector",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("vector", models.BinaryField()),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "namespace",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="memory.embeddingnamespace",
                    ),
                ),
                (
                    "summary",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="conversations.summary",
                    ),
                ),
            ],
            options={
                "indexes": [
                    models.Index(fields=["namespace", "id"], name="summary_vector_namespace_id")
                ],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("summary", "namespace"), name="summary_vector_ns_unique"
                    )
                ],
            },
        ),
        migrations.RunPython(forward, migrations.RunPython.noop, elidable=False),
    ]
