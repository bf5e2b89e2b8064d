from tests.integrity.seeding import rules_bypassed  # noqa: F401
from tests.largefile_support import large_file_storage  # noqa: F401
