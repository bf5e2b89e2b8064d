"""Hash every DRF token issued before hashing into an `ApiToken` (marked `legacy`, no
expiry: it keeps working until rotated) and delete the plain-text keys."""

import hashlib

from django.db import migrations


def hash_legacy_tokens(apps, schema_editor):
    Token = apps.get_model("authtoken", "Token")
    ApiToken = apps.get_model("tokens", "ApiToken")
    for old in Token.objects.all().iterator():
        digest = hashlib.sha256(old.key.encode()).hexdigest()
        if not ApiToken.objects.filter(digest=digest).exists():
            live = ApiToken.objects.filter(user_id=old.user_id, name="default", revoked_at=None)
            ApiToken.objects.create(
                user_id=old.user_id,
                name="legacy" if live.exists() else "default",
                prefix=old.key[:12],
                digest=digest,
                legacy=True,
            )
    Token.objects.all().delete()


class Migration(migrations.Migration):
    dependencies = [
        ("tokens", "0001_initial"),
        ("authtoken", "0004_alter_tokenproxy_options"),
    ]

    # Not reversible: the plain-text keys are gone by design.
    operations = [migrations.RunPython(hash_legacy_tokens, migrations.RunPython.noop)]
