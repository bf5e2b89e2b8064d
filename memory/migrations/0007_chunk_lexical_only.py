"""A search unit may be lexical-only: stored and searched by its words, never embedded (the
middle of a long tool result, memory.tool_output_policy). Nullable with no default, so
SQLite adds the column in place (no table rebuild, the 0005/0006 triggers stay) and
PostgreSQL rewrites nothing; null reads as "embedded", as every unit was before."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("memory", "0006_chunk_text_archived")]

    operations = [
        migrations.AddField(
            model_name="chunk",
            name="lexical_only",
            field=models.BooleanField(blank=True, null=True),
        ),
    ]
