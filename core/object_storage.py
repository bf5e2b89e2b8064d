"""Which backend keeps the objects LCM writes outside the database: the file system under
LCM_DATA_DIR, or an S3-compatible bucket (LCM_S3_BUCKET, django-storages) that several
hosts share. settings.py builds STORAGES from this; docs/deploy.md explains the choice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured


def object_storage(folder: str, *, lcm: dict[str, Any], data_dir: Path) -> dict:
    """`{"backend", "options"}` of the storage that holds `folder` ("large-files",
    "streams"): `<data_dir>/<folder>`, or `<LCM_S3_PREFIX>/<folder>/` in the bucket."""
    if not lcm["LCM_S3_BUCKET"]:
        return {
            "backend": "django.core.files.storage.FileSystemStorage",
            "options": {"location": str(data_dir / folder)},
        }
    try:
        import storages.backends.s3  # noqa: F401
    except ImportError:
        raise ImproperlyConfigured(
            "LCM_S3_BUCKET is set but django-storages and boto3 are not installed "
            "(pip install 'lcm-server[s3]')"
        ) from None
    return {
        "backend": "storages.backends.s3.S3Storage",
        "options": {
            "bucket_name": lcm["LCM_S3_BUCKET"],
            "endpoint_url": lcm["LCM_S3_ENDPOINT_URL"] or None,
            "region_name": lcm["LCM_S3_REGION"] or None,
            "location": f"{lcm['LCM_S3_PREFIX'].strip('/')}/{folder}".strip("/"),
            # Callers choose every key and write it once: never renamed, never public.
            "file_overwrite": True,
            "default_acl": None,
            "querystring_auth": True,
        },
    }


def storages_setting(*, lcm: dict[str, Any], data_dir: Path) -> dict:
    """The STORAGES entries of large files, stream journals and archive segments."""
    journals = object_storage("streams", lcm=lcm, data_dir=data_dir)
    exports = object_storage("exports", lcm=lcm, data_dir=data_dir)
    archive = object_storage("archive", lcm=lcm, data_dir=data_dir)
    return {
        # Encrypts at rest when LCM_ENCRYPTION_KEY is set, around the real backend
        # (docs/security.md).
        "large_files": {
            "BACKEND": "security.storage.EncryptedStorage",
            "OPTIONS": object_storage("large-files", lcm=lcm, data_dir=data_dir),
        },
        # Finished stream journals and turn event logs (turns/journal_store.py). Their lines
        # are already encrypted one by one (core/crypto.py): no second wrapper.
        "stream_journals": {"BACKEND": journals["backend"], "OPTIONS": journals["options"]},
        # Archive segments (archive/segments.py): each object is already encrypted whole when
        # LCM_ENCRYPTION_KEY is set (core/crypto.py), so no second wrapper.
        "archive_segments": {
            "BACKEND": archive["backend"],
            "OPTIONS": archive["options"],
        },
        # Export archives built in the background (security/export_jobs.py), kept for
        # LCM_EXPORT_KEEP_HOURS; encrypted at rest like large files.
        "export_archives": {
            "BACKEND": "security.storage.EncryptedStorage",
            "OPTIONS": exports,
        },
    }
