"""The taxonomy page's auto-coding form. The page shows targets and shares as percentages, so
the form takes them as percentages too ("95" or "95%"); the API takes fractions."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal, DecimalException, InvalidOperation

from django import forms

from annotations.services.review.auto_coding import (
    AUDIT_SHARE_RANGE,
    TARGET_RANGE,
    AutoCodingError,
)
from siamweb.humanize import percent_figure, percent_text

DEFAULT_AUDIT_PERCENT = Decimal(5)
_FIELD_NAMES = {"target_precision": "target precision", "audit_share": "audit share"}


def _percent(raw: str, field: str) -> tuple[Decimal, str]:
    """The typed percentage, exact, and as typed without its sign."""
    text = raw.strip().removesuffix("%").strip()
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise forms.ValidationError(
            f"the {field} is a percentage such as 95 or 95%, got {raw.strip()}"
        ) from None
    if not value.is_finite():
        raise forms.ValidationError(f"the {field} is a percentage such as 95 or 95%")
    return value, text


def _as_fraction(percent: Decimal) -> float:
    # Divided in decimal, then rounded once: float 99.9 / 100 is 0.9990000000000001, above
    # the 0.999 the help text allows. A percent too large for decimal's exponents (1e9999999)
    # is out of any range: infinity, refused as such.
    try:
        return float(percent / 100)
    except DecimalException:
        return float("inf") if percent > 0 else float("-inf")


def _range_refusal(field: str, allowed: tuple[float, float], got: str) -> str:
    low, high = allowed
    off = " (empty turns it off)" if field == "target_precision" else ""
    return (
        f"the {_FIELD_NAMES[field]} is from {percent_text(low)} to {percent_text(high)}{off}, "
        f"got {got}%"
    )


def refusal_in_percent(error: AutoCodingError) -> str:
    """The service's refusal as the form words its own: in percent (the service words it in
    fractions, as the API takes them)."""
    if error.allowed is None or error.got is None:
        return str(error)
    return _range_refusal(error.field, error.allowed, percent_figure(error.got))


def auto_coding_fields(policy, typed: Mapping[str, str] | None) -> dict[str, str]:
    """What the form's boxes show: what was typed after a refusal, else the policy in percent
    ("95", "5"), and the default audit share where there is no policy."""
    if typed is not None:
        return {name: typed.get(name, "") for name in ("target_precision", "audit_share")}
    if policy is None:
        return {"target_precision": "", "audit_share": f"{DEFAULT_AUDIT_PERCENT}"}
    target = policy.target_precision
    return {
        "target_precision": "" if target is None else percent_figure(target),
        "audit_share": percent_figure(policy.audit_share),
    }


def _fraction_in(raw: str, field: str, allowed: tuple[float, float]) -> float:
    """A box's percent as a fraction within ``allowed``, refused in percent as it was typed."""
    percent, typed = _percent(raw, field.replace("_", " "))
    fraction = _as_fraction(percent)
    if not allowed[0] <= fraction <= allowed[1]:
        raise forms.ValidationError(_range_refusal(field, allowed, typed))
    return fraction


class AutoCodingForm(forms.Form):
    target_precision = forms.CharField(required=False, max_length=20)
    audit_share = forms.CharField(required=False, max_length=20)

    def clean_target_precision(self) -> float | None:
        """As a fraction; None (off) when empty or "off"."""
        raw = self.cleaned_data["target_precision"]
        if raw.strip().casefold() in ("", "off"):
            return None
        return _fraction_in(raw, "target_precision", TARGET_RANGE)

    def clean_audit_share(self) -> float:
        """As a fraction; the default share when empty."""
        raw = self.cleaned_data["audit_share"]
        if not raw.strip():
            return _as_fraction(DEFAULT_AUDIT_PERCENT)
        return _fraction_in(raw, "audit_share", AUDIT_SHARE_RANGE)

    def refusal(self) -> str:
        """Every field's refusal in one sentence, for the page."""
        problems = [str(e) for errors in self.errors.values() for e in errors]
        return "; ".join(problems) + "; nothing changed"
