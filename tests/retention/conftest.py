from tests.archive.conftest import archive_folder  # noqa: F401
