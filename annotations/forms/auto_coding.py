"""The taxonomy page's auto-coding form. The page shows targets and shares as percentages, so
the form takes them as percentages too ("95" or "95%"); the API takes fractions."""

from __future__ import annotations

import math
from collections.abc import Mapping

from django import forms

from annotations.services.review.auto_coding import TARGET_RANGE
from siamweb.humanize import percent_figure

DEFAULT_AUDIT_PERCENT = 5.0


def _percent(raw: str, field: str) -> float:
    text = raw.strip().removesuffix("%").strip()
    try:
        value = float(text)
    except ValueError:
        raise forms.ValidationError(
            f"the {field} is a percentage such as 95 or 95%, got {raw.strip()}"
        ) from None
    if not math.isfinite(value):
        raise forms.ValidationError(f"the {field} is a percentage such as 95 or 95%")
    return value


def auto_coding_fields(policy, typed: Mapping[str, str] | None) -> dict[str, str]:
    """What the form's boxes show: what was typed after a refusal, else the policy in percent
    ("95", "5"), and the default audit share where there is no policy."""
    if typed is not None:
        return {name: typed.get(name, "") for name in ("target_precision", "audit_share")}
    if policy is None:
        return {"target_precision": "", "audit_share": percent_figure(DEFAULT_AUDIT_PERCENT / 100)}
    target = policy.target_precision
    return {
        "target_precision": "" if target is None else percent_figure(target),
        "audit_share": percent_figure(policy.audit_share),
    }


class AutoCodingForm(forms.Form):
    target_precision = forms.CharField(required=False, max_length=20)
    audit_share = forms.CharField(required=False, max_length=20)

    def clean_target_precision(self) -> float | None:
        """As a fraction; None (off) when empty or "off"."""
        raw = self.cleaned_data["target_precision"]
        if raw.strip().casefold() in ("", "off"):
            return None
        percent = _percent(raw, "target precision")
        low, high = (100 * bound for bound in TARGET_RANGE)
        if not low <= percent <= high:
            raise forms.ValidationError(
                f"the target precision is from {low:g}% to {high:g}% (empty turns it off), "
                f"got {percent:g}%"
            )
        return percent / 100

    def clean_audit_share(self) -> float:
        """As a fraction; the default share when empty."""
        raw = self.cleaned_data["audit_share"]
        percent = DEFAULT_AUDIT_PERCENT if not raw.strip() else _percent(raw, "audit share")
        if not 0 <= percent <= 100:
            raise forms.ValidationError(f"the audit share is from 0% to 100%, got {percent:g}%")
        return percent / 100

    def refusal(self) -> str:
        """Every field's refusal in one sentence, for the page."""
        problems = [str(e) for errors in self.errors.values() for e in errors]
        return "; ".join(problems) + "; nothing changed"
