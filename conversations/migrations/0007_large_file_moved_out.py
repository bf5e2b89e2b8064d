"""LargeFile now belongs to the largefiles app (largefiles 0001): removed from this app's
state only; the table and its rows stay where they are."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0006_cjk_triggers_skip_ascii"),
        ("largefiles", "0001_initial"),
        ("importers", "0002_large_file_in_its_own_app"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="LargeFile")],
            database_operations=[],
        ),
    ]
