"""Forms of the review pages: the queue's filters, a verdict, a batch, a settled conflict."""

from __future__ import annotations

import math
from urllib.parse import urlencode

from django import forms

from annotations.models import Group, Judgement, ReviewItem, Taxonomy
from annotations.selectors.queue import QueueFilters
from siamweb.ids import IdError, IdFormField, parse_id


class BlindModeForm(forms.Form):
    """``blind=1`` hides every model score, so that curators judge without the model's nudge."""

    # A checkbox sends "1"; anything but "0"/"1" is a mistake worth saying so.
    blind = forms.TypedChoiceField(
        required=False,
        choices=[("0", "off"), ("1", "on")],
        coerce=lambda value: value == "1",
        empty_value=False,
    )

    @property
    def is_blind(self) -> bool:
        return bool(self.is_valid() and self.cleaned_data["blind"])

    def query_string(self) -> str:
        return urlencode({"blind": "1"}) if self.is_blind else ""


class ReviewFiltersForm(BlindModeForm):
    """What a curator narrows the queue to, from the query string; every page keeps them."""

    STATUS_CHOICES = [
        ("", "Any open"),
        (ReviewItem.Status.PENDING, "Pending"),
        (ReviewItem.Status.AWAITING_GROUP, "Awaiting the right group"),
        (ReviewItem.Status.SKIPPED, "Skipped"),
    ]

    taxonomy = forms.SlugField(required=False, max_length=64)
    group = forms.CharField(required=False, max_length=64, strip=True)
    score_min = forms.FloatField(required=False, min_value=0, max_value=1)
    score_max = forms.FloatField(required=False, min_value=0, max_value=1)
    status = forms.ChoiceField(required=False, choices=STATUS_CHOICES)
    # A bulk job's id: the rows it sent for review (its "review them" link).
    job = forms.IntegerField(required=False, min_value=1, max_value=2**63 - 1)

    def clean_taxonomy(self) -> Taxonomy | None:
        slug = self.cleaned_data["taxonomy"]
        if not slug:
            return None
        taxonomy = Taxonomy.objects.filter(slug=slug).first()
        if taxonomy is None:
            raise forms.ValidationError(f"no taxonomy {slug!r}")
        return taxonomy

    def clean(self) -> dict:
        data = super().clean()
        code = data.get("group")
        if code and "taxonomy" not in self.errors:
            taxonomy = data.get("taxonomy")
            if taxonomy is None:
                self.add_error("group", "choose a taxonomy for the group code")
            else:
                group = Group.objects.filter(taxonomy=taxonomy, code=code).first()
                if group is None:
                    self.add_error("group", f"no group {code!r} in taxonomy {taxonomy.slug}")
                else:
                    data["group"] = group
        low, high = data.get("score_min"), data.get("score_max")
        if low is not None and high is not None and low > high:
            self.add_error("score_max", "must not be below score_min")
        return data

    def queue_filters(self) -> QueueFilters:
        data = self.cleaned_data
        return QueueFilters(
            taxonomy=data["taxonomy"],
            group=data["group"] or None,
            score_min=data["score_min"],
            score_max=data["score_max"],
            status=data["status"] or None,
            bulk_job_id=data["job"],
        )

    def query_string(self) -> str:
        """The valid filters again, for the links and forms of the next page."""
        if not self.is_valid():
            return ""
        data = self.cleaned_data
        params = {
            "taxonomy": data["taxonomy"].slug if data["taxonomy"] else "",
            "group": data["group"].code if data["group"] else "",
            "score_min": "" if data["score_min"] is None else repr(data["score_min"]),
            "score_max": "" if data["score_max"] is None else repr(data["score_max"]),
            "status": data["status"],
            "job": "" if data["job"] is None else str(data["job"]),
            "blind": "1" if data["blind"] else "",
        }
        return urlencode({name: value for name, value in params.items() if value})


class QueuePageForm(ReviewFiltersForm):
    """The filters plus the keyset cursor of the queue table: ``after=<priority>:<id>``. The
    table lists judged items too (a verdict is found there, and changed from its input's
    page); the card only ever takes open ones."""

    STATUS_CHOICES = [
        *ReviewFiltersForm.STATUS_CHOICES,
        (ReviewItem.Status.DONE, "Done (judged)"),
    ]
    status = forms.ChoiceField(required=False, choices=STATUS_CHOICES)
    after = forms.CharField(required=False, max_length=80)

    def clean_after(self) -> tuple[float, int] | None:
        raw = self.cleaned_data["after"]
        if not raw:
            return None
        priority, _, item_id = raw.partition(":")
        try:
            cursor = (float(priority), parse_id(item_id))
        except ValueError:
            raise forms.ValidationError("expected <priority>:<id>") from None
        if not math.isfinite(cursor[0]) or cursor[1] < 0:
            raise forms.ValidationError("expected <priority>:<id>")
        return cursor


class JudgementForm(forms.Form):
    """A verdict from the review page; the group is a code within the item's taxonomy."""

    verdict = forms.ChoiceField(choices=Judgement.Verdict.choices)
    group_code = forms.CharField(required=False, max_length=64)
    # The prediction the card showed: a verdict on a prediction replaced since is refused.
    prediction_id = IdFormField(required=False, min_value=1)
    # One per rendered card: a double click or a retried request replays the first verdict.
    idempotency_key = forms.CharField(required=False, max_length=100)

    def __init__(self, *args, review_item: ReviewItem, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.review_item = review_item

    def clean_group_code(self) -> Group | None:
        return _group_in(self.review_item.taxonomy_id, self.cleaned_data["group_code"])


class ItemIdsField(forms.Field):
    """Repeated ``name=<id>`` values: review item ids, in the order given, without repeats."""

    widget = forms.MultipleHiddenInput

    def to_python(self, value) -> list[int]:
        if not value:
            return []
        try:
            ids = [parse_id(raw) for raw in value]
        except IdError:
            raise forms.ValidationError("expected review item ids") from None
        if any(item_id <= 0 for item_id in ids):
            raise forms.ValidationError("expected review item ids")
        return list(dict.fromkeys(ids))


class BatchVerdictForm(forms.Form):
    """A batch of tiles: ``item`` lists every tile shown, ``reject`` the ones marked a false
    match; the rest are confirmed."""

    MAX_ITEMS = 200

    ACCEPT_ABOVE = "accept_above"

    item = ItemIdsField()
    reject = ItemIdsField(required=False)
    # Which button sent the form: "Confirm the rest" (the default, also Enter) or "accept all
    # above p", which confirms only the unmarked tiles whose match probability is at least
    # ``accept_min`` and leaves the others open (the marked ones are false matches all the same).
    action = forms.ChoiceField(
        required=False, choices=[("", "confirm the rest"), (ACCEPT_ABOVE, "accept all above p")]
    )
    accept_min = forms.FloatField(required=False, min_value=0, max_value=1)

    def clean_item(self) -> list[int]:
        ids = self.cleaned_data["item"]
        if len(ids) > self.MAX_ITEMS:
            raise forms.ValidationError(f"at most {self.MAX_ITEMS} items in one batch")
        return ids

    def clean(self) -> dict:
        data = super().clean()
        shown, rejected = data.get("item"), data.get("reject")
        if shown is not None and rejected is not None:
            stray = sorted(set(rejected) - set(shown))
            if stray:
                self.add_error("reject", f"items {stray} are not in this batch")
            data["confirm"] = [item_id for item_id in shown if item_id not in set(rejected)]
        if data.get("action") == self.ACCEPT_ABOVE:
            if data.get("accept_min") is None and "accept_min" not in self.errors:
                self.add_error("accept_min", "give the probability to accept from, 0 to 1")
        else:
            # The threshold box is on the page for the other button; confirming ignores it.
            self.errors.pop("accept_min", None)
            data["accept_min"] = None
        return data


class BatchUndoForm(forms.Form):
    """The verdicts one batch submit recorded (their ids, carried by the page), to take back."""

    judgement = ItemIdsField(error_messages={"required": "name the verdicts to undo"})

    def clean_judgement(self) -> list[int]:
        ids = self.cleaned_data["judgement"]
        if len(ids) > BatchVerdictForm.MAX_ITEMS:
            raise forms.ValidationError(f"at most {BatchVerdictForm.MAX_ITEMS} verdicts at once")
        return ids


class ConflictResolveForm(forms.Form):
    """An admin's decision: a group code of the item's taxonomy, or none of the groups."""

    group_code = forms.CharField(required=False, max_length=64)
    none = forms.BooleanField(required=False)

    def __init__(self, *args, review_item: ReviewItem, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.review_item = review_item

    def clean_group_code(self) -> Group | None:
        return _group_in(self.review_item.taxonomy_id, self.cleaned_data["group_code"])

    def clean(self) -> dict:
        data = super().clean()
        if "group_code" in self.errors:
            return data
        if bool(data.get("group_code")) == bool(data.get("none")):
            self.add_error("group_code", "choose either a group or none of them")
        return data


def _group_in(taxonomy_id: int, code: str) -> Group | None:
    code = code.strip()
    if not code:
        return None
    group = Group.objects.filter(taxonomy_id=taxonomy_id, code=code).first()
    if group is None:
        raise forms.ValidationError(f"no group {code!r} in this taxonomy")
    return group
