from django.db import migrations, models


class Migration(migrations.Migration):
    """The indexing job's lease and the time a conversation fell behind (nullable: adding
    them rewrites no table)."""

    dependencies = [("memory", "0007_chunk_lexical_only")]

    operations = [
        migrations.AddField(
            model_name="messageindexcursor",
            name="lease_until",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="messageindexcursor",
            name="behind_since",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
