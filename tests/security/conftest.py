"""Shared fixtures of the security tests."""

import pytest
from django.core.files.storage import storages


@pytest.fixture(autouse=True)
def jobs_run_at_once(settings):
    """Redaction and export jobs run as they are queued (after the commit), as a worker
    would run them: an API test reads the finished job from its URL."""
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "sync": True}


@pytest.fixture(autouse=True)
def export_archive_folder(settings, tmp_path):
    """Export archives kept in this test's own folder (not LCM_DATA_DIR's, which the
    settings chose once for the whole run)."""
    settings.STORAGES = {
        **settings.STORAGES,
        "export_archives": {
            "BACKEND": "security.storage.EncryptedStorage",
            "OPTIONS": {
                "backend": "django.core.files.storage.FileSystemStorage",
                "options": {"location": str(tmp_path / "exports")},
            },
        },
    }
    storages._storages.pop("export_archives", None)
    yield
    storages._storages.pop("export_archives", None)
