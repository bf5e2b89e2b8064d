from tests.archive.conftest import archive_folder, compacted  # noqa: F401
