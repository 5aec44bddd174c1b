"""The ranker in the product: fitted on verdicts, gated, served with the model it ranks for, and
never a 500 when its files are damaged."""

from __future__ import annotations

import csv
import functools
import io
import shutil

import pytest

from annotations.models import Group
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.verdicts import judgement_create
from models_app.bulk.jobs import bulk_job_create
from models_app.bulk.run import bulk_job_execute
from models_app.bulk.selectors import bulk_job_result
from models_app.models import Deployment, RankerVersion
from models_app.serving.engines import artifact_path, live_engine
from models_app.serving.normalize import rank_taxonomy_groups
from models_app.serving.rankers import engine_prior, forget_loaded_rankers, serving_ranker
from models_app.siamese.ranker.candidates import candidates_of_texts
from models_app.siamese.ranker.features import FEATURE_SET
from models_app.training.ranker_training import (
    KEEP_RANKERS,
    judged_texts,
    ranker_fit,
    rankers_due,
    rankers_prune,
)
from tests.conftest import build_live_model
from tests.test_match_probability import RIGHT, WRONG, judge_all


def live_ranker(taxonomy) -> RankerVersion | None:
    return Deployment.objects.get(taxonomy=taxonomy).ranker


def test_a_fitted_ranker_goes_live_with_its_gate_report_and_history(tiny_taxonomy, curator):
    judge_all(tiny_taxonomy, curator)
    ranker = live_ranker(tiny_taxonomy)
    assert ranker is not None and ranker.status == RankerVersion.Status.LIVE
    assert (
        ranker.model_version
        == Deployment.objects.get(taxonomy=tiny_taxonomy).index_build.model_version
    )
    assert ranker.verdicts == len(RIGHT) + len(WRONG)
    assert ranker.gate_report["held_out"] >= 1
    assert (artifact_path(ranker.artifact_path) / "history.npz").is_file()
    # Reassigned texts rejected the group on top: the history holds them.
    texts = {j.text: j for j in judged_texts(tiny_taxonomy)}
    assert any(texts[text].rejected for text in WRONG)


def test_a_text_is_never_offered_a_group_rejected_for_it_and_k_groups_come_back(
    tiny_taxonomy, curator
):
    (item,) = inputs_submit(taxonomy=tiny_taxonomy, texts=["Java Barista"], source="api")
    rejected = item.top_group
    judgement_create(review_item=item, user=curator, verdict="false_match")
    (result,) = rank_taxonomy_groups(tiny_taxonomy, ["Java Barista"], k=4)
    assert rejected.id not in [g.group_id for g in result.groups]
    assert len(result.groups) == 4  # five groups, one ruled out


def cold_answer(taxonomy, text: str):
    """The answer of the cold start (the starter ranker), as before any verdict."""
    (result,) = rank_taxonomy_groups(
        taxonomy, [text], k=2, ranker=engine_prior(live_engine(taxonomy))
    )
    return result


def test_a_damaged_ranker_file_serves_the_cold_start_and_is_logged_once(
    tiny_taxonomy, curator, api_client, caplog
):
    judge_all(tiny_taxonomy, curator)
    ranker = live_ranker(tiny_taxonomy)
    (artifact_path(ranker.artifact_path) / "ranker.json").write_text("{not json")
    forget_loaded_rankers()

    for _ in range(3):
        response = api_client.post(
            "/api/v1/taxonomies/jobs/normalize", {"texts": ["Senior Java Engineer"]}, format="json"
        )
        assert response.status_code == 200
    (result,) = response.json()["results"]
    assert result["groups"][0]["code"] == "15-1252"
    assert result["probability"] == cold_answer(tiny_taxonomy, "Senior Java Engineer").probability
    assert caplog.text.count("cannot serve") == 1  # remembered: not once a request


def test_a_ranker_of_another_feature_set_serves_the_cold_start(tiny_taxonomy, curator):
    judge_all(tiny_taxonomy, curator)
    path = artifact_path(live_ranker(tiny_taxonomy).artifact_path) / "ranker.json"
    path.write_text(path.read_text().replace(FEATURE_SET, "r0-retired"))
    forget_loaded_rankers()
    (result,) = rank_taxonomy_groups(tiny_taxonomy, ["Senior Java Engineer"], k=2)
    assert result.probability == cold_answer(tiny_taxonomy, "Senior Java Engineer").probability


def test_a_missing_ranker_folder_serves_the_cold_start_too(tiny_taxonomy, curator):
    judge_all(tiny_taxonomy, curator)
    shutil.rmtree(artifact_path(live_ranker(tiny_taxonomy).artifact_path))
    forget_loaded_rankers()
    (result,) = rank_taxonomy_groups(tiny_taxonomy, ["Senior Java Engineer"], k=2)
    cold = cold_answer(tiny_taxonomy, "Senior Java Engineer")
    assert (result.groups[0].code, result.probability) == ("15-1252", cold.probability)


def test_a_ranker_fitted_for_another_model_is_not_used(tiny_taxonomy, curator):
    judge_all(tiny_taxonomy, curator)
    old = live_ranker(tiny_taxonomy)
    build_live_model(tiny_taxonomy)  # a new model goes live; the pointer still names the old ranker
    assert live_ranker(tiny_taxonomy) == old
    (result,) = rank_taxonomy_groups(tiny_taxonomy, ["Senior Java Engineer"], k=2)
    assert result.probability == cold_answer(tiny_taxonomy, "Senior Java Engineer").probability
    # The new model is due a ranker of its own, and gets one.
    assert tiny_taxonomy in rankers_due()
    fitted = ranker_fit(taxonomy=tiny_taxonomy)
    assert fitted.model_version != old.model_version and live_ranker(tiny_taxonomy) == fitted
    assert RankerVersion.objects.get(id=old.id).status == RankerVersion.Status.RETIRED


def test_old_rankers_are_deleted_with_their_files_and_the_live_one_never(tiny_taxonomy, curator):
    judge_all(tiny_taxonomy, curator)
    for _ in range(KEEP_RANKERS + 1):
        ranker_fit(taxonomy=tiny_taxonomy)
    fitted = KEEP_RANKERS + 2
    kept = list(RankerVersion.objects.filter(taxonomy=tiny_taxonomy).order_by("number"))
    assert [v.number for v in kept] == list(range(fitted - KEEP_RANKERS + 1, fitted + 1))
    assert live_ranker(tiny_taxonomy) == kept[-1]
    folders = sorted(p.name for p in artifact_path(f"{tiny_taxonomy.slug}/rankers").iterdir())
    assert folders == sorted(artifact_path(v.artifact_path).name for v in kept)
    # The newest rows still say which verdicts were fitted on: no fit is due again.
    assert rankers_due() == []

    # An older ranker live (the newer ones rejected, say) survives any pruning.
    oldest, middle, newest = kept
    Deployment.objects.filter(taxonomy=tiny_taxonomy).update(ranker=oldest)
    assert rankers_prune(taxonomy=tiny_taxonomy, keep=2) == 1
    assert set(RankerVersion.objects.filter(taxonomy=tiny_taxonomy)) == {oldest, newest}
    assert not artifact_path(middle.artifact_path).exists()
    forget_loaded_rankers()
    assert serving_ranker(live_engine(tiny_taxonomy), oldest.id).version_id == oldest.id


def test_a_ranker_is_due_only_once_enough_verdicts_are_new(tiny_taxonomy, curator, settings):
    settings.SIAMWEB_RANKER_REFIT_VERDICTS = 3
    assert rankers_due() == []  # no verdicts at all
    judge_all(tiny_taxonomy, curator)
    assert rankers_due() == []
    items = inputs_submit(
        taxonomy=tiny_taxonomy, texts=["Night Nurse", "Java Coder", "Tea Barista"], source="api"
    )
    for item in items[:2]:
        judgement_create(review_item=item, user=curator, verdict="confirm")
    assert rankers_due() == []
    judgement_create(review_item=items[2], user=curator, verdict="confirm")
    assert rankers_due() == [tiny_taxonomy]


def test_verdicts_of_none_of_these_only_are_too_few_and_leave_the_cold_start(
    tiny_taxonomy, curator
):
    texts = [f"Unrelated title {n}" for n in range(25)]
    for item in inputs_submit(taxonomy=tiny_taxonomy, texts=texts, source="api"):
        judgement_create(review_item=item, user=curator, verdict="none")
    assert ranker_fit(taxonomy=tiny_taxonomy) is None
    assert live_ranker(tiny_taxonomy) is None


@pytest.mark.parametrize("k", [1, 3, 5])
def test_groups_come_back_with_probabilities_best_first(tiny_taxonomy, curator, k):
    judge_all(tiny_taxonomy, curator)
    (result,) = rank_taxonomy_groups(tiny_taxonomy, ["Senior Tax Accountant"], k=k)
    assert len(result.groups) == k
    probabilities = [g.probability for g in result.groups]
    assert all(p is not None for p in probabilities)
    assert probabilities == sorted(probabilities, reverse=True)
    assert result.probability == probabilities[0] < 1
    assert result.groups[0].code == Group.objects.get(taxonomy=tiny_taxonomy, code="13-2011").code


def test_a_texts_ranking_is_the_same_whatever_k_is_asked(tiny_taxonomy, settings, monkeypatch):
    """The ranker was fitted on candidates from a fixed number of member hits and groups a
    matcher; asked for more groups than those, the first ones keep their order and probability
    (a deeper search once moved the top answer of 8% of real titles at k=20) and the rest
    follow them, with no probability."""
    # The tiny taxonomy's five groups are all candidates as the product counts them: fewer here.
    settings.SIAMWEB_RANKER_DEPTH = 3
    settings.SIAMWEB_MEMBERS_PER_GROUP = 8
    monkeypatch.setattr("models_app.serving.normalize.CANDIDATES_PER_MATCHER", 1)
    monkeypatch.setattr(
        "models_app.serving.normalize.candidates_of_texts",
        functools.partial(candidates_of_texts, by_description=0),
    )
    texts = ["Senior Tax Accountant", "java programmer", "barista with latte art"]
    ranked = dict(zip(texts, rank_taxonomy_groups(tiny_taxonomy, texts, k=1), strict=True))
    wider = rank_taxonomy_groups(tiny_taxonomy, texts, k=5)

    for result in wider:
        first = ranked[result.text]
        with_probability = [g for g in result.groups if g.probability is not None]
        assert len(with_probability) >= 1
        assert (with_probability[0].group_id, with_probability[0].probability) == (
            first.groups[0].group_id,
            first.groups[0].probability,
        )
        assert result.probability == first.probability
        # The deeper search's groups come after the ranked ones, each group once.
        assert result.groups[: len(with_probability)] == with_probability
        assert len(result.groups) == 5 > len(with_probability)
        assert len({g.group_id for g in result.groups}) == 5
        # Alone, it is ranked and searched deeper as in the batch (scores to the 1e-6 a float32
        # product of another shape keeps, so compared after rounding with that slack).
        (alone,) = rank_taxonomy_groups(tiny_taxonomy, [result.text], k=5)
        assert [(g.group_id, g.probability is None) for g in alone.groups] == [
            (g.group_id, g.probability is None) for g in result.groups
        ]
        for one, batched in zip(alone.groups, result.groups, strict=True):
            assert one.score == pytest.approx(batched.score, abs=2e-4)


def test_a_bulk_job_answers_with_the_ranker_it_started_with_to_its_end(tiny_taxonomy, curator):
    """Its auto-coding threshold was set for that ranker's probabilities: a ranker fitted while
    it runs neither moves them nor is pruned away from under it."""
    judge_all(tiny_taxonomy, curator)
    started_with = live_ranker(tiny_taxonomy)
    titles = ["Senior Tax Accountant", "java programmer", "barista with latte art", "ICU nurse"]
    job = bulk_job_create(
        taxonomy=tiny_taxonomy, upload=io.BytesIO(("title\n" + "\n".join(titles * 3)).encode()),
        filename="titles.csv", column="title", user=None, enqueue=False,
    )  # fmt: skip
    refitted = []

    def curators_go_on(_job) -> None:
        if refitted:
            return
        # More verdicts, all the other way: a ranker fitted on them answers otherwise.
        others_texts = [f"{title} {n}" for title in titles for n in range(3)]
        for item in inputs_submit(taxonomy=tiny_taxonomy, texts=others_texts, source="api"):
            others = Group.objects.filter(taxonomy=tiny_taxonomy).exclude(id=item.top_group_id)
            judgement_create(review_item=item, user=curator, verdict="reassign",
                             group=others.order_by("code").first())  # fmt: skip
        for _ in range(KEEP_RANKERS + 1):
            refitted.append(ranker_fit(taxonomy=tiny_taxonomy))

    done = bulk_job_execute(job_id=job.id, chunk_rows=4, after_chunk=curators_go_on)
    assert done.status == "succeeded", done.error
    assert live_ranker(tiny_taxonomy) == refitted[-1] != started_with
    assert done.ranker_pinned == started_with.id
    assert RankerVersion.objects.filter(id=started_with.id).exists()  # kept while it ran
    forget_loaded_rankers()
    engine = live_engine(tiny_taxonomy)
    pinned = rank_taxonomy_groups(
        tiny_taxonomy, titles, k=2, ranker=serving_ranker(engine, started_with.id)
    )
    now = rank_taxonomy_groups(tiny_taxonomy, titles, k=2)
    assert [a.probability for a in pinned] != [a.probability for a in now]
    expected = {a.text: a.probability for a in pinned}
    with bulk_job_result(done, "csv").open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 12
    # The chunks after the refits (the first was answered before the curators' new members).
    for row in rows[4:]:
        assert float(row["probability"]) == pytest.approx(expected[row["title"]], abs=2e-4)
