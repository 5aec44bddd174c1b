"""The queue bench/review_pages.py measures: pending inputs with their predictions and review items,
and the team's history of verdicts, bulk-inserted. Imported once Django is set up on the scratch
database."""

from __future__ import annotations

import math
import random

from django.db import connection, transaction

from annotations.models import (
    Group,
    GroupRelation,
    Input,
    Judgement,
    Member,
    Prediction,
    ReviewItem,
    Taxonomy,
)
from bench import _pg
from models_app.models import ModelVersion
from models_app.serving.normalize import rank_taxonomy_groups
from models_app.siamese.augment.extra_words import ExtraWords
from models_app.siamese.augment.typos import add_typos_exact
from models_app.siamese.text import comparison_key


def score_profiles(taxonomy: Taxonomy, size: int) -> list[list[float]]:
    """The five best scores of real predictions of realistic inputs, best first."""
    texts = _pg.realistic_inputs(size, seed=23)
    profiles = []
    for start in range(0, len(texts), 100):
        for normalization in rank_taxonomy_groups(taxonomy, texts[start : start + 100], k=5):
            scores = [group.score for group in normalization.groups]
            if len(scores) == 5:
                profiles.append(scores)
    return profiles


def seed_queue(
    taxonomy: Taxonomy, pending: int, *, done: int, curators: list, seed: int = 3
) -> dict[str, object]:
    """``pending`` inputs with a prediction and a review item each, as inputs_submit stores
    them (the item's taxonomy, top group, top score and priority copied from the prediction),
    and a history of ``done`` more, each confirmed by one of ``curators`` over the last 30
    days: the counts and the "not judged by me yet" test then read realistic tables."""
    count = pending + done
    rng = random.Random(seed)
    version = ModelVersion.objects.get(taxonomy=taxonomy)
    groups = list(Group.objects.filter(taxonomy=taxonomy).order_by("code"))
    members: dict[int, list[tuple[int, str]]] = {}
    for member_id, group_id, text in Member.objects.filter(taxonomy=taxonomy).values_list(
        "id", "group_id", "text"
    ):
        members.setdefault(group_id, []).append((member_id, text))
    related: dict[int, list[int]] = {}
    for group_id, related_id in GroupRelation.objects.filter(taxonomy=taxonomy).values_list(
        "group_id", "related_id"
    ):
        related.setdefault(group_id, []).append(related_id)
    by_id = {group.id: group for group in groups}
    profiles = score_profiles(taxonomy, 400)
    # Zipf over the groups in a random order: a few groups get thousands of items, most a few.
    order = groups[:]
    rng.shuffle(order)
    weights = [1 / (rank + 1) for rank in range(len(order))]
    tops = rng.choices(order, weights=weights, k=count)
    words = ExtraWords("train")

    seen: set[str] = set()
    inputs, plans = [], []
    for number, top in enumerate(tops):
        _member_id, title = rng.choice(members[top.id])
        text = words.decorate(title, rng)
        if rng.random() < 0.3:
            text = add_typos_exact(text, rng)
        text = text[:190]
        key = comparison_key(text)
        if key in seen:
            text = f"{text} #{number}"
            key = comparison_key(text)
        seen.add(key)
        occurrences = min(1000, int(rng.paretovariate(1.5)))  # mostly 1, a long tail
        inputs.append(
            Input(
                taxonomy=taxonomy,
                text=text,
                normalized_text=key,
                source=Input.Source.API,
                occurrences=occurrences,
            )
        )
        candidates = [g for g in related.get(top.id, []) if g != top.id]
        rng.shuffle(candidates)
        others = candidates[:4]
        while len(others) < 4:
            other = rng.choice(groups).id
            if other != top.id and other not in others:
                others.append(other)
        scores = rng.choice(profiles)
        ranked = []
        for group_id, score in zip([top.id, *others], scores, strict=True):
            member_id, member = rng.choice(members[group_id])
            group = by_id[group_id]
            ranked.append(
                {
                    "group_id": group_id,
                    "code": group.code,
                    "name": group.name,
                    "score": score,
                    "member_id": member_id,
                    "member": member,
                    "source": "model",
                }
            )
        plans.append((ranked, occurrences))

    with transaction.atomic():
        Input.objects.bulk_create(inputs, batch_size=5000)
        predictions = [
            Prediction(
                input=input_row,
                model_version=version,
                ranked_groups=ranked,
                top_group_id=ranked[0]["group_id"],
                top_score=ranked[0]["score"],
                margin=ranked[0]["score"] - ranked[1]["score"],
            )
            for input_row, (ranked, _) in zip(inputs, plans, strict=True)
        ]
        Prediction.objects.bulk_create(predictions, batch_size=5000)
        items = [
            ReviewItem(
                input=prediction.input,
                taxonomy=taxonomy,
                prediction=prediction,
                top_group_id=prediction.top_group_id,
                top_score=prediction.top_score,
                # The formula of inputs_submit (annotations/services/review.py, _priority).
                priority=(1 - prediction.margin)
                + (1 - prediction.top_score)
                + 0.1 * math.log1p(occurrences),
            )
            for prediction, (_, occurrences) in zip(predictions, plans, strict=True)
        ]
        ReviewItem.objects.bulk_create(items, batch_size=5000)
        history = rng.sample(items, done)
        judged = {item.id for item in history}
        ReviewItem.objects.filter(id__in=judged).update(status=ReviewItem.Status.DONE)
        Judgement.objects.bulk_create(
            [
                Judgement(
                    review_item=item,
                    verdict=Judgement.Verdict.CONFIRM,
                    group_id=item.top_group_id,
                    user=rng.choice(curators),
                    prediction=item.prediction,
                    previous_status=ReviewItem.Status.PENDING,
                )
                for item in history
            ],
            batch_size=5000,
        )
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE annotations_judgement "
                "SET created_at = now() - random() * interval '30 days'"
            )
    _pg.vacuum_analyze()
    counts: dict[int, int] = {}
    for item in items:
        if item.id not in judged:
            counts[item.top_group_id] = counts.get(item.top_group_id, 0) + 1
    biggest = max(counts, key=counts.get)
    return {
        "pending": pending,
        "done_with_a_verdict": done,
        "groups_with_pending": len(counts),
        "biggest_group": by_id[biggest].code,
        "biggest_group_pending": counts[biggest],
        "median_group_pending": sorted(counts.values())[len(counts) // 2],
    }
