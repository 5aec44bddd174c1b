"""Quantities as people read them, in messages and on pages of both apps."""

from __future__ import annotations


def format_size(n: int) -> str:
    """Bytes as people read them: "1.0 GB", "2.0 MB", "512 KB"."""
    for unit, size in (("GB", 1024**3), ("MB", 1024**2)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n / 1024:.0f} KB"


def duration_text(seconds: float | None) -> str:
    """A human ETA: "40 s", "3 min", "1 h 5 min"; empty when unknown."""
    if seconds is None or seconds < 0:
        return ""
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min"
