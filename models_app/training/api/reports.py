"""Serializers of the reports a training run carries: a fine-tune's gate report and a promotion's
flip report, as the schema documents them."""

from __future__ import annotations

from rest_framework import serializers


class GateMetricSerializer(serializers.Serializer):
    name = serializers.CharField(
        help_text="typos, composition, extra_words, annotations, p_at_10, …"
    )
    suite = serializers.CharField(
        help_text="frozen, feedback, or drift: a frozen-suite metric against the reference "
        "version instead of the live one"
    )
    live = serializers.FloatField(
        required=False, help_text="The live model's score (not on drift rows)"
    )
    reference = serializers.FloatField(
        required=False, help_text="A drift row: the reference version's score"
    )
    against = serializers.CharField(
        required=False, help_text="A drift row: the reference version, e.g. onet/v1"
    )
    candidate = serializers.FloatField()
    delta = serializers.FloatField(help_text="candidate minus live (or minus reference)")
    passed = serializers.BooleanField()
    n = serializers.IntegerField(help_text="Cases both models answered")
    ci95 = serializers.ListField(
        child=serializers.FloatField(), help_text="95% interval of the paired difference"
    )
    lost = serializers.IntegerField(help_text="Cases the baseline got right, the candidate not")
    gained = serializers.IntegerField(help_text="Cases the candidate got right, the baseline not")
    p_worse = serializers.FloatField(
        help_text="McNemar's exact one-sided p that the candidate is worse"
    )
    alpha = serializers.FloatField(help_text="The level this row was tested at")
    significantly_worse = serializers.BooleanField()
    why = serializers.CharField(help_text="Why the row passed or blocked, in words")


class GateVerdictsSerializer(serializers.Serializer):
    count = serializers.IntegerField(help_text="Curator verdicts compared")
    live = serializers.FloatField(help_text="Share of them the live model agrees with")
    candidate = serializers.FloatField(help_text="Share of them the candidate agrees with")
    rose = serializers.BooleanField()


class GateReportSerializer(serializers.Serializer):
    test = serializers.CharField(help_text="The paired test every row is judged by")
    alpha = serializers.FloatField(help_text="The gate's significance level, over all rows")
    alpha_per_test = serializers.FloatField(help_text="alpha divided by the rows tested")
    reference_version = serializers.CharField(
        required=False,
        help_text="The version the chain of gate promotions behind the live one started from; "
        "absent when that is the live version",
    )
    decision = serializers.ChoiceField(choices=["promote", "reject"])
    reasons = serializers.ListField(child=serializers.CharField())
    metrics = GateMetricSerializer(many=True)
    frozen_summary = serializers.DictField(
        required=False, help_text="Per model, the frozen suite's MRR and P@10 (not tested)"
    )
    verdicts = GateVerdictsSerializer(required=False)
    new_verdicts = serializers.IntegerField(required=False)
    stage_seconds = serializers.DictField(
        child=serializers.FloatField(),
        required=False,
        help_text="Seconds per stage of the run: learn, held_out, catch_up, index, gate, …",
    )
    forced_by = serializers.CharField(
        required=False, help_text="The admin who promoted a candidate the gate rejected"
    )


class FlipGroupSerializer(serializers.Serializer):
    code = serializers.CharField()
    name = serializers.CharField()


class FlipRowSerializer(serializers.Serializer):
    input = serializers.CharField()
    before = FlipGroupSerializer(allow_null=True, help_text="The old model's top group")
    after = FlipGroupSerializer(allow_null=True, help_text="The new model's top group")
    curator = FlipGroupSerializer(allow_null=True, help_text="The group a curator gave")
    verdict = serializers.CharField(allow_null=True)
    confirmed = serializers.BooleanField(
        help_text="A curator confirmed the old answer (in broken: the new model gets it wrong)"
    )


class FlipCountsSerializer(serializers.Serializer):
    fixed = serializers.IntegerField()
    broken = serializers.IntegerField()
    changed = serializers.IntegerField()
    confirmed_now_wrong = serializers.IntegerField()


class FlipReportSerializer(serializers.Serializer):
    compared = serializers.IntegerField()
    counts = FlipCountsSerializer(help_text="Complete counts; each list holds at most 200 rows")
    fixed = FlipRowSerializer(many=True)
    broken = FlipRowSerializer(many=True)
    changed = FlipRowSerializer(many=True)
