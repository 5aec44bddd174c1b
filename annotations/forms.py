from __future__ import annotations

from django import forms

from annotations.models import Group, Judgement, ReviewItem


class JudgementForm(forms.Form):
    """A verdict from the review page; the group is a code within the item's taxonomy."""

    verdict = forms.ChoiceField(choices=Judgement.Verdict.choices)
    group_code = forms.CharField(required=False, max_length=64)
    # The prediction the card showed: a verdict on a prediction replaced since is refused.
    prediction_id = forms.IntegerField(required=False, min_value=1)

    def __init__(self, *args, review_item: ReviewItem, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.review_item = review_item

    def clean_group_code(self) -> Group | None:
        code = self.cleaned_data["group_code"].strip()
        if not code:
            return None
        group = Group.objects.filter(
            taxonomy_id=self.review_item.input.taxonomy_id, code=code
        ).first()
        if group is None:
            raise forms.ValidationError(f"no group {code!r} in this taxonomy")
        return group
