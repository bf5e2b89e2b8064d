"""ImportedFile's key now names largefiles.LargeFile (the same table: state only)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("importers", "0001_initial"),
        ("largefiles", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="importedfile",
                    name="large_file",
                    field=models.OneToOneField(
                        on_delete=django.db.models.deletion.PROTECT,
                        primary_key=True,
                        related_name="import_source",
                        serialize=False,
                        to="largefiles.largefile",
                    ),
                ),
            ],
            database_operations=[],
        ),
    ]
