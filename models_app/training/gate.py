"""The gate: live and candidate answer the same cases, and a candidate goes live only when no
test shows it significantly worse and the share of verdicts it gets right by itself rises.

The cases:
- the frozen suite, the paper's tests generated from the taxonomy's own strings with a fixed
  seed, so every run sees the same cases;
- the held-out fifth of the verdicts new since the live version, answered by the run's
  phase-1 model before the run learns them (``retraining.finetune_execute``);
- every past verdict as a regression suite, answered by the model by itself: a verdict's own
  curator member is left out of the search, or the model would only be finding the answer it
  was given.
Each row is a paired McNemar test (``models_app/siamese/stats.py``); the frozen suite is also
measured against the *reference*, the version the chain of gate promotions behind the live one
started from (``gate_reference``), so losses spread over rounds cannot add up unseen.

Those cases are synthetic or few. The real traffic is weighed too (``Comparison.answers_moved``):
of the inputs nobody has judged, the answers the candidate changes that the live ranker was
confident of, moved to a group no curator has put a text in, are answers it most likely breaks;
their expected number beyond a small allowance blocks. A fine-tune compares them as users would
see them: the live pair against the candidate with a ranker fitted for it (``add_served``). The
same comparison gives the flip report: the inputs whose top group a promotion changes.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.conf import settings

from annotations.models import Group, Input, Judgement, Member, Taxonomy
from models_app.models import IndexBuild, ModelVersion, TrainingRun
from models_app.serving.engines import LiveEngine, NoLiveModel, encoder_for
from models_app.serving.normalize import rank_taxonomy_groups
from models_app.serving.rankers import ServingRanker
from models_app.siamese.evaluation import build_test_suite, evaluate
from models_app.siamese.hybrid_matcher import HybridMatcher
from models_app.siamese.search import SearchConfig
from models_app.siamese.specs import parse_search_config
from models_app.siamese.stats import paired_comparison
from models_app.siamese.text import comparison_key
from models_app.training.services.indexes import member_vectors

FROZEN_SETS = ("typos", "composition", "extra_words")
FLIP_ROWS_KEPT = 200
# What the gate tests: each frozen test's accuracy against the live version (and the chain's
# reference, see gate_reference) and the held-out verdicts, each a paired McNemar test of the
# same cases (models_app/siamese/stats.py). MRR and P@10 are reported beside them, not tested:
# they move with the accuracies and would test the same losses twice.
# The flip report compares the newest inputs; beyond this many it reports a sample of them.
FLIP_INPUTS_COMPARED = 20_000
# The moved answers the gate lists as examples, the likeliest to be right before first.
MOVED_EXAMPLES_KEPT = 20
# Texts the live ranker weighs at a time while the gate asks it about moved answers.
SERVED_BATCH = 500
# How many groups the served answer offers when the gate looks up the old group's probability:
# past the tenth, a group's probability is far from confident.
OFFERED_GROUPS = 10


def gate_reference(version: ModelVersion) -> ModelVersion:
    """The version the chain of gate promotions that led to ``version`` started from.

    Walks up the parents while a version went live through the gate. It stops at one that did
    not: built from scratch, shipped, or promoted by an admin against the gate (a person
    accepted what it lost, so it becomes the new reference). ``version`` itself when it did
    not go live through the gate.
    """
    # The gate's own decision, stored before the version goes live: a run that failed after
    # that still put its version live through the gate, and a forced one says "reject".
    gated = set(
        TrainingRun.objects.filter(
            taxonomy_id=version.taxonomy_id,
            kind=TrainingRun.Kind.FINETUNE,
            gate_report__decision="promote",
        ).values_list("model_version_id", flat=True)
    )
    parents = dict(
        ModelVersion.objects.filter(taxonomy_id=version.taxonomy_id).values_list("id", "parent_id")
    )
    reference_id, walked = version.id, {version.id}
    while reference_id in gated and parents.get(reference_id) not in (None, *walked):
        reference_id = parents[reference_id]
        walked.add(reference_id)
    return version if reference_id == version.id else ModelVersion.objects.get(id=reference_id)


@dataclass(frozen=True)
class FinalVerdict:
    """Where curators put a judged text in the end."""

    text: str
    group_id: int | None  # None: "none of these"
    kind: str  # Judgement.Verdict: confirm, reassign or none


class Comparison:
    """Models over the same members, ready to answer the same cases: "live", "candidate", and
    while the gate needs them "learnt" (the phase-1 model) and "reference" (see
    gate_reference)."""

    def __init__(self, taxonomy, texts, labels, verdicts) -> None:
        self.taxonomy = taxonomy
        self.texts, self.labels = texts, labels
        self.verdicts: dict[str, FinalVerdict] = verdicts
        self.matchers: dict[str, HybridMatcher] = {}
        self.member_ids: list[int] = []  # of ``texts``, where known
        self._inputs: list[str] | None = None  # the newest inputs, read once
        self._tops: dict[str, list[int | None]] = {}  # per model, its top group for each input
        # Per model, its engine and the ranker beside it: what users would see from it.
        self.served: dict[str, tuple[LiveEngine, ServingRanker]] = {}
        # Per served model, for each input: its top group and the groups offered's probabilities.
        self._answers: dict[str, list[tuple[int | None, dict[int, float]]]] = {}

    @classmethod
    def build(cls, taxonomy: Taxonomy) -> Comparison:
        verdicts = _final_verdicts(taxonomy)
        # Curator members of judged texts are left out: the models answer those by themselves.
        rows = Member.objects.filter(taxonomy=taxonomy).values_list(
            "id", "group_id", "text", "normalized_text", "source"
        )
        members = [
            (member_id, group_id, text)
            for member_id, group_id, text, key, source in rows.order_by("id")
            if not (source == Member.Source.CURATOR and key in verdicts)
        ]
        comparison = cls(
            taxonomy, [text for *_, text in members], [g for _, g, _ in members], verdicts
        )
        comparison.member_ids = [member_id for member_id, _, _ in members]
        return comparison

    @classmethod
    def of_versions(cls, taxonomy: Taxonomy, live: ModelVersion, candidate: ModelVersion):
        comparison = cls.build(taxonomy)
        for name, version in (("live", live), ("candidate", candidate)):
            comparison.add(name, encoder_for(version), parse_search_config(version.config))
        return comparison

    def add(
        self,
        name: str,
        encoder,
        search: SearchConfig,
        *,
        index_build: IndexBuild | None = None,
        vectors: np.ndarray | None = None,
    ) -> None:
        """``index_build``: one built with ``encoder``, whose vectors stand in for encoding the
        members it holds again (the tower takes minutes to encode a large taxonomy);
        ``vectors``: the members' vectors in ``encoder``'s embedding, already encoded."""
        if index_build is not None and self.member_ids:
            vectors = member_vectors(encoder, index_build, self.member_ids, self.texts)
        self.matchers[name] = HybridMatcher(
            encoder, self.texts, self.labels, config=search, vectors=vectors
        )
        self._tops.pop(name, None)

    def add_served(self, name: str, engine: LiveEngine, ranker: ServingRanker) -> None:
        """Model ``name`` as users would see it: ``engine`` with ``ranker`` beside it. Once
        "live" and "candidate" both are, real traffic is compared as served."""
        self.served[name] = (engine, ranker)
        self._answers.pop(name, None)

    @property
    def traffic_served(self) -> bool:
        return {"live", "candidate"} <= set(self.served)

    def served_answers(self, name: str) -> list[tuple[int | None, dict[int, float]]]:
        """Model ``name``'s served answer to each of ``inputs()``: its top group and the
        probability of each group offered (up to ``OFFERED_GROUPS``), ranked once."""
        if name not in self._answers:
            engine, ranker = self.served[name]
            inputs, found = self.inputs(), []
            for start in range(0, len(inputs), SERVED_BATCH):
                answers = rank_taxonomy_groups(
                    self.taxonomy, inputs[start : start + SERVED_BATCH], k=OFFERED_GROUPS,
                    engine=engine, ranker=ranker,
                )  # fmt: skip
                found += [
                    (
                        answer.groups[0].group_id if answer.groups else None,
                        {group.group_id: group.probability or 0.0 for group in answer.groups},
                    )
                    for answer in answers
                ]
            self._answers[name] = found
        return self._answers[name]

    def traffic_tops(self, name: str) -> list[int | None]:
        """Model ``name``'s top group for each of ``inputs()``: as served where both models
        are (``add_served``), else by the model alone."""
        if self.traffic_served:
            return [top for top, _ in self.served_answers(name)]
        return self.top_groups(name)

    def drop(self, name: str) -> None:
        del self.matchers[name]
        self._tops.pop(name, None)

    def inputs(self) -> list[str]:
        """The taxonomy's newest inputs (up to FLIP_INPUTS_COMPARED): real traffic."""
        if self._inputs is None:
            self._inputs = list(
                Input.objects.filter(taxonomy=self.taxonomy)
                .order_by("-id")
                .values_list("text", flat=True)[:FLIP_INPUTS_COMPARED]
            )
        return self._inputs

    def top_groups(self, name: str) -> list[int | None]:
        """Model ``name``'s top group (by the model alone) for each of ``inputs()``, ranked once
        for the gate and the flip report both."""
        if name not in self._tops:
            rankings = self.matchers[name].rank(self.inputs(), 1)
            self._tops[name] = [ranking[0] if ranking else None for ranking in rankings]
        return self._tops[name]

    def held_out_hits(self, held_out: frozenset[str]) -> tuple[list[bool], list[bool]] | None:
        """The held-out verdicts, answered by the live model and the phase-1 ("learnt") one:
        per verdict, whether each model's top group is the curator's."""
        cases = [
            (verdict.text, verdict.group_id)
            for key, verdict in self.verdicts.items()
            if key in held_out and verdict.group_id
        ]
        if not cases:
            return None
        return self._hits(self.matchers["live"], cases), self._hits(self.matchers["learnt"], cases)

    def gate(
        self,
        *,
        alpha: float,
        held_out: tuple[list[bool], list[bool]] | None = None,
        held_out_served: tuple[list[bool], list[bool]] | None = None,
        reference_label: str | None = None,
    ) -> dict[str, Any]:
        """Live against candidate on each frozen test and the held-out verdicts (as served,
        each model with a ranker fitted for it, where ``held_out_served`` gives them; the
        models alone are then reported beside, not tested); where a
        "reference" matcher was added (the version labelled ``reference_label``), reference
        against candidate on the frozen tests too. A row blocks only when the candidate is
        significantly worse on its cases: McNemar's exact one-sided p below ``alpha`` divided
        by the number of rows tested (Bonferroni), so that one of many rows failing by chance
        stays below ``alpha`` for a candidate that is no worse."""
        if "reference" in self.matchers and not reference_label:
            raise ValueError("a reference matcher needs the label of its version")
        taxonomy_members = list(
            Member.objects.filter(taxonomy=self.taxonomy, source=Member.Source.TAXONOMY)
            .order_by("id")
            .values_list("group_id", "text")
        )
        suite = build_test_suite(taxonomy_members, seed=0, size=settings.SIAMWEB_GATE_SUITE_SIZE)
        frozen = {name: cases for name, cases in suite.items() if name in FROZEN_SETS and cases}
        hits = {
            model: {name: self._hits(matcher, cases) for name, cases in frozen.items()}
            for model, matcher in self.matchers.items()
        }
        pairs: list[tuple[str, str, str, list[bool], list[bool]]] = [
            (name, "frozen", "live", hits["live"][name], hits["candidate"][name]) for name in frozen
        ]
        if "reference" in hits:
            pairs += [
                (name, "drift", "reference", hits["reference"][name], hits["candidate"][name])
                for name in frozen
            ]
        if held_out_served is not None:
            pairs.append(("held_out_feedback", "feedback", "live", *held_out_served))
        elif held_out is not None:
            pairs.append(("held_out_feedback", "feedback", "live", *held_out))
        per_test = alpha / max(len(pairs), 1)
        rows = [
            gate_row(name, suite_name, baseline, before, after, alpha=per_test,
                     against=reference_label if suite_name == "drift" else None)
            for name, suite_name, baseline, before, after in pairs
        ]  # fmt: skip
        for row in rows:
            if row["name"] == "held_out_feedback":
                _say_how_answered(row, served=held_out_served is not None, alone=held_out)

        judged = [(v.text, v.group_id) for v in self.verdicts.values() if v.group_id]
        verdicts = {
            "count": len(judged),
            "live": self._share_right(self.matchers["live"], judged) if judged else 0.0,
            "candidate": self._share_right(self.matchers["candidate"], judged) if judged else 0.0,
        }
        verdicts["rose"] = bool(judged) and verdicts["candidate"] > verdicts["live"]

        reasons = [row["why"] for row in rows if not row["passed"]]
        moved = self.answers_moved(
            confident=settings.SIAMWEB_GATE_CONFIDENT_PROBABILITY,
            allowed_per_thousand=settings.SIAMWEB_GATE_MOVED_PER_THOUSAND,
        )
        if moved is not None and not moved["passed"]:
            reasons.append(moved["why"])
        if not judged:
            reasons.append("there are no verdicts to learn from")
        elif not verdicts["rose"]:
            reasons.append(
                f"the share of verdicts it gets right by itself did not rise "
                f"({verdicts['live']:.3f} → {verdicts['candidate']:.3f})"
            )
        summary = {
            model: {
                key: round(_mean([scores[f"{name}/{metric}"] for name in frozen]), 4)
                for key, metric in (("mrr", "mrr"), ("p_at_10", "p@10"))
            }
            for model, scores in (
                (model, evaluate(matcher, frozen)) for model, matcher in self.matchers.items()
            )
        }
        return {
            "test": "McNemar exact, one-sided, paired on the same cases",
            "alpha": alpha,
            "alpha_per_test": round(per_test, 6),
            **({"reference_version": reference_label} if "reference" in hits else {}),
            "decision": "reject" if reasons else "promote",
            "reasons": reasons,
            "metrics": rows,
            "frozen_summary": summary,
            "verdicts": verdicts,
            **({"answers_moved": moved} if moved is not None else {}),
        }

    def answers_moved(self, *, confident: float, allowed_per_thousand: float) -> dict | None:
        """What the candidate would break in real traffic nobody has judged.

        Of ``inputs()`` without a curator's verdict, the ones whose top group the candidate
        changes, weighed two ways: by curators' past verdicts on the new group (a group they
        have put texts in is evidence the move may be right, and the move is not counted) and
        by the live ranker's probability that the old answer is right (served as curators see
        it). A move of an answer held at ``confident`` or more to a group without that evidence
        loses a right answer with about that probability: the sum is the answers expected lost,
        and above ``allowed_per_thousand`` of the inputs compared it blocks. None when no
        model is live to weigh the old answers with.
        """
        inputs = self.inputs()
        before, after = self.traffic_tops("live"), self.traffic_tops("candidate")
        evidence = Counter(v.group_id for v in self.verdicts.values() if v.group_id)
        moved_at = [
            row
            for row, (text, old, new) in enumerate(zip(inputs, before, after, strict=True))
            if old is not None
            and new != old
            and not evidence[new]
            and comparison_key(text) not in self.verdicts
        ]
        unsupported = [(inputs[row], before[row], after[row]) for row in moved_at]
        if self.traffic_served:
            offered = self.served_answers("live")
            probabilities = [offered[row][1].get(before[row], 0.0) for row in moved_at]
        else:
            try:
                probabilities = _served_probabilities(self.taxonomy, unsupported)
            except NoLiveModel:
                return None
        moves = sorted(
            (
                (probability, text, old, new)
                for probability, (text, old, new) in zip(probabilities, unsupported, strict=True)
                if probability >= confident
            ),
            key=lambda move: -move[0],
        )
        expected_lost = sum(probability for probability, *_ in moves)
        allowed = allowed_per_thousand * len(inputs) / 1000
        passed = expected_lost <= allowed
        plural = "s" if len(moves) != 1 else ""
        why = (
            f"{len(moves)} answer{plural} the live ranker holds at p ≥ {confident:.2f} "
            f"move{'' if plural else 's'} to groups no curator has put a text in: about "
            f"{expected_lost:.1f} right answer{'s' if round(expected_lost, 1) != 1 else ''} lost "
            f"of {len(inputs)} inputs compared, {'within' if passed else 'above'} the "
            f"{allowed:.1f} allowed"
        )
        groups = Group.objects.in_bulk({g for _, _, old, new in moves for g in (old, new) if g})
        return {
            "compared": len(inputs),
            "answered": "served" if self.traffic_served else "model alone",
            "changed_without_evidence": len(unsupported),
            "confident": confident,
            "moved": len(moves),
            "expected_lost": round(expected_lost, 3),
            "allowed": round(allowed, 3),
            "passed": passed,
            "why": why,
            "examples": [
                {
                    "input": text,
                    "probability": round(probability, 4),
                    "before": _group_ref(groups.get(old)),
                    "after": _group_ref(groups.get(new)),
                }
                for probability, text, old, new in moves[:MOVED_EXAMPLES_KEPT]
            ],
        }

    def flips(self) -> dict[str, Any]:
        """Inputs whose top group changes: fixed, broken, or just changed. A judged input is
        answered with its verdict whatever the model, so whether a model fixed or broke it is
        read from the models alone; the others as served where both models are."""
        inputs = self.inputs()
        tops = {name: list(self.traffic_tops(name)) for name in ("live", "candidate")}
        if self.traffic_served:
            judged = [
                row
                for row, text in enumerate(inputs)
                if (verdict := self.verdicts.get(comparison_key(text))) and verdict.group_id
            ]
            for name, top in tops.items():
                rankings = self.matchers[name].rank([inputs[row] for row in judged], 1)
                for row, ranking in zip(judged, rankings, strict=True):
                    top[row] = ranking[0] if ranking else None
        groups = Group.objects.in_bulk(
            {g for top in tops.values() for g in top if g}
            | {v.group_id for v in self.verdicts.values() if v.group_id}
        )
        report: dict[str, Any] = {
            "compared": len(inputs),
            "counts": {"fixed": 0, "broken": 0, "changed": 0, "confirmed_now_wrong": 0},
            "fixed": [],
            "broken": [],
            "changed": [],
        }
        for text, before, after in zip(inputs, tops["live"], tops["candidate"], strict=True):
            verdict = self.verdicts.get(comparison_key(text))
            if verdict is not None and verdict.group_id is not None:
                gold = verdict.group_id
                kind = (
                    "fixed"
                    if before != gold and after == gold
                    else "broken"
                    if before == gold and after != gold
                    else None
                )
            else:
                kind = "changed" if before != after else None
            if kind is None:
                continue
            confirmed = kind == "broken" and verdict.kind == Judgement.Verdict.CONFIRM
            report["counts"][kind] += 1
            report["counts"]["confirmed_now_wrong"] += confirmed
            if len(report[kind]) < FLIP_ROWS_KEPT:
                report[kind].append(
                    {
                        "input": text,
                        "before": _group_ref(groups.get(before)),
                        "after": _group_ref(groups.get(after)),
                        "curator": _group_ref(groups.get(verdict.group_id)) if verdict else None,
                        "verdict": verdict.kind if verdict else None,
                        "confirmed": confirmed,
                    }
                )
        # Confirmed items the new model now gets wrong stand out: they come first.
        report["broken"].sort(key=lambda row: not row["confirmed"])
        return report

    @staticmethod
    def _share_right(matcher: HybridMatcher, cases: list[tuple[str, int]]) -> float:
        return sum(Comparison._hits(matcher, cases)) / len(cases)

    @staticmethod
    def _hits(matcher: HybridMatcher, cases: list[tuple[str, int]]) -> list[bool]:
        """Per case, whether the matcher's top group is the case's."""
        rankings = matcher.rank([text for text, _ in cases], 1)
        return [bool(r) and r[0] == group for r, (_, group) in zip(rankings, cases, strict=True)]


def _served_probabilities(taxonomy: Taxonomy, moves: list[tuple[str, int, int | None]]):
    """Per (text, old group, new group), the live ranker's probability that the old group is
    right, as served (0 where it does not offer that group at all)."""
    probabilities: list[float] = []
    for start in range(0, len(moves), SERVED_BATCH):
        batch = moves[start : start + SERVED_BATCH]
        served = rank_taxonomy_groups(taxonomy, [text for text, _, _ in batch], k=OFFERED_GROUPS)
        for answer, (_, old, _) in zip(served, batch, strict=True):
            offered = {group.group_id: group.probability for group in answer.groups}
            probabilities.append(offered.get(old) or 0.0)
    return probabilities


def _final_verdicts(taxonomy: Taxonomy) -> dict[str, FinalVerdict]:
    """Per judged text, where curators put it: the latest live final verdict wins."""
    found: dict[str, FinalVerdict] = {}
    rows = (
        Judgement.objects.live()
        .filter(review_item__taxonomy=taxonomy, verdict__in=Judgement.FINAL_VERDICTS)
        .order_by("created_at", "id")
        .values_list(
            "review_item__input__text", "review_item__input__normalized_text", "verdict", "group_id"
        )
    )
    for text, key, verdict, group_id in rows:
        found[key] = FinalVerdict(text=text, group_id=group_id, kind=verdict)
    return found


def _frozen_scores(scores: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Per model, the frozen suite's gate metrics: each test's accuracy, then MRR and P@10
    averaged over the tests."""
    frozen = {}
    for model, found in scores.items():
        metrics = {
            name: found[f"{name}/accuracy"] for name in FROZEN_SETS if f"{name}/accuracy" in found
        }
        for name, key in (("mrr", "mrr"), ("p_at_10", "p@10")):
            metrics[name] = _mean(
                [found[f"{n}/{key}"] for n in FROZEN_SETS if f"{n}/{key}" in found]
            )
        frozen[model] = metrics
    return frozen


def gate_row(
    name: str,
    suite: str,
    baseline: str,
    before: list[bool],
    after: list[bool],
    *,
    alpha: float,
    against: str | None = None,
) -> dict:
    """One gate row: ``baseline`` ("live" or "reference") against the candidate, case by case,
    with the paired test's numbers and, in words, why it passed or blocked."""
    found = paired_comparison(before, after, alpha=alpha)
    row = {"name": name, "suite": suite, **found}
    if baseline != "live":
        row[baseline] = row.pop("live")
    if against:
        row["against"] = against
    since = f" since {against}" if against else ""
    odds = (
        f"{found['lost']} lost, {found['gained']} gained of {found['n']}; "
        f"p = {found['p_worse']:.4f}, {'below' if found['p_worse'] < alpha else 'not below'} "
        f"{alpha:.4f}"
    )
    if found["significantly_worse"]:
        row["passed"] = False
        row["why"] = f"{name} fell by {-found['delta']:.3f}{since} ({odds}): significantly worse"
    else:
        row["passed"] = True
        change = "fell" if found["delta"] < 0 else "rose" if found["delta"] > 0 else "held"
        amount = f" by {abs(found['delta']):.3f}" if found["delta"] else ""
        row["why"] = f"{name} {change}{amount}{since} ({odds}): within noise or better"
    return row


def _say_how_answered(
    row: dict, *, served: bool, alone: tuple[list[bool], list[bool]] | None
) -> None:
    """Mark the held-out row as answered as served (each model with a ranker fitted for it on
    the other verdicts) or by the models alone; a served row carries the models alone's shares
    too, reported and not tested."""
    row["answered"] = "served" if served else "model alone"
    if not served or alone is None:
        return
    live, candidate = (round(_mean([float(hit) for hit in hits]), 4) for hits in alone)
    row["model_alone"] = {"live": live, "candidate": candidate, "n": len(alone[0])}
    row["why"] += f"; by the models alone {live:.3f} → {candidate:.3f} (not tested)"


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _group_ref(group: Group | None) -> dict | None:
    return {"code": group.code, "name": group.name} if group is not None else None
