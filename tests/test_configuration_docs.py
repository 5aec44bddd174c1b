"""docs/configuration.md lists every environment variable the settings read, and nothing else."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Read by the test settings only, or by Django/Celery themselves rather than siamweb/settings.py.
NOT_FOR_DEPLOYERS = {"DJANGO_SETTINGS_MODULE"}


def variables_read_by_settings() -> set[str]:
    source = (ROOT / "siamweb" / "settings.py").read_text(encoding="utf-8")
    return set(re.findall(r"env_\w+\(\s*\"([A-Z][A-Z0-9_]+)\"", source)) - NOT_FOR_DEPLOYERS


def variables_documented() -> set[str]:
    table = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    return {name for row in rows for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", row.split("|")[1])}


def test_every_variable_the_settings_read_is_documented():
    assert sorted(variables_read_by_settings() - variables_documented()) == []


def test_every_documented_variable_is_read_by_the_settings():
    assert sorted(variables_documented() - variables_read_by_settings()) == []
