"""Typed readers for environment variables.

Every reader raises ``ImproperlyConfigured`` naming the variable when its value is malformed, so a
bad deployment fails at start-up with a message that says what to fix.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, *, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false, yes/no), got {raw!r}")


def env_int(
    name: str, *, default: int, minimum: int | None = None, maximum: int | None = None
) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ImproperlyConfigured(f"{name} must be at most {maximum}, got {value}")
    return value


def env_float(name: str, *, default: float, minimum: float | None = None) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}") from None
    if not math.isfinite(value):  # float() reads "nan" and "inf", which no setting means
        raise ImproperlyConfigured(f"{name} must be a finite number, got {raw!r}")
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {value}")
    return value


# DRF's throttle rates: a count per second, minute, hour or day ("20/min", "1000/day").
_RATE = re.compile(r"[0-9]+/(s|sec|second|m|min|minute|h|hour|d|day)")


def env_rate(name: str, *, default: str) -> str:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip()
    if not _RATE.fullmatch(value):
        raise ImproperlyConfigured(
            f"{name} must be a count per second, minute, hour or day (e.g. 20/min), got {raw!r}"
        )
    return value


def env_list(name: str, *, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_path(name: str, *, default: Path) -> Path:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    path = Path(raw).expanduser()
    if not path.is_absolute():
        # Resolved against each process's working directory, the web server and a worker
        # started elsewhere would read two different folders (two databases, under SQLite).
        raise ImproperlyConfigured(f"{name} must be an absolute path, got {raw!r}")
    if path.exists() and not path.is_dir():
        raise ImproperlyConfigured(f"{name} must name a directory, but {raw!r} is a file")
    return path.resolve()
