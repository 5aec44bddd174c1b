"""Quantities as people read them, in messages and on pages of both apps."""

from __future__ import annotations

from decimal import Decimal


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


def percent_figure(fraction: float) -> str:
    """A fraction as a number of percent with the digits it was set with: 0.998 -> "99.8",
    0.004 -> "0.4", 0.05 -> "5". Six significant digits drop float noise (0.9990000000000001);
    no exponent, however small."""
    return f"{Decimal(f'{fraction * 100:.6g}'):f}"


def percent_text(fraction: float) -> str:
    """``percent_figure`` with its sign: 0.998 -> "99.8%"."""
    return f"{percent_figure(fraction)}%"
