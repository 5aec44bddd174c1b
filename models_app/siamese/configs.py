"""What every configurable part of the engine shares: the error a bad config raises, the type
check that names the field, and the artifact kind of a saved encoder."""

from __future__ import annotations

import dataclasses
from typing import Any

ENCODER_ARTIFACT = "encoder"


class ConfigError(ValueError):
    """An encoder configuration that names an unknown part or holds an impossible value."""


def check_field_types(config: Any) -> None:
    """Refuse values of the wrong type (a JSON ``2.5`` where a count belongs, ``"yes"`` for a
    flag) before any range check runs, so the message names the field."""
    for spec in dataclasses.fields(config):
        value, default = getattr(config, spec.name), spec.default
        if isinstance(default, bool):
            if not isinstance(value, bool):
                raise ConfigError(f"{spec.name} must be true or false, got {value!r}")
        elif isinstance(default, int):
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"{spec.name} must be an integer, got {value!r}")
        elif isinstance(default, float):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError(f"{spec.name} must be a number, got {value!r}")
        elif isinstance(default, str) and not isinstance(value, str):
            raise ConfigError(f"{spec.name} must be a string, got {value!r}")
