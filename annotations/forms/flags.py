"""Forms of the flags: a curator's flag on a card, the admins' list filters."""

from __future__ import annotations

from django import forms

from annotations.models import ReviewFlag


class ReviewFlagForm(forms.Form):
    kind = forms.ChoiceField(choices=ReviewFlag.Kind.choices)
    comment = forms.CharField(required=False, max_length=ReviewFlag.COMMENT_MAX_LENGTH)

    def clean(self) -> dict:
        data = super().clean()
        if data.get("kind") == ReviewFlag.Kind.COMMENT and not data.get("comment"):
            self.add_error("comment", "write the comment")
        return data


class ReviewFlagFiltersForm(forms.Form):
    STATUS_CHOICES = [("open", "Open"), ("resolved", "Resolved"), ("all", "All")]

    kind = forms.ChoiceField(required=False, choices=[("", "Any kind"), *ReviewFlag.Kind.choices])
    status = forms.ChoiceField(required=False, choices=STATUS_CHOICES)

    def resolved(self) -> bool | None:
        """The selector's ``resolved`` argument: open flags unless asked otherwise."""
        return {"resolved": True, "all": None}.get(self.cleaned_data["status"], False)
