"""The README's settings table is generated from core/config.py and must stay in step."""

from __future__ import annotations

from pathlib import Path

from core.config import SETTINGS, settings_table_markdown

ROOT = Path(__file__).resolve().parent.parent


def test_readme_settings_table_matches_the_settings_registry():
    readme = (ROOT / "README.md").read_text()
    assert settings_table_markdown() in readme, "regenerate with: manage.py lcm_settings --markdown"


def test_every_setting_is_documented_with_a_default_and_meaning():
    for setting in SETTINGS:
        assert setting.name.startswith("LCM_")
        assert len(setting.help) > 15, setting.name


def test_readme_opens_with_the_two_setup_commands():
    readme = (ROOT / "README.md").read_text()
    setup = readme.split("## Set up", 1)[1].split("## ", 1)[0]
    assert "./scripts/up" in setup and "./scripts/test" in setup
    for script in ("scripts/up", "scripts/test", ".ci/run"):
        assert (ROOT / script).stat().st_mode & 0o111, f"{script} is not executable"


def test_every_docs_page_linked_from_the_readme_exists():
    readme = (ROOT / "README.md").read_text()
    for line in readme.splitlines():
        if line.startswith("- [docs/"):
            target = line.split("](", 1)[1].split(")", 1)[0]
            assert (ROOT / target).is_file(), target
