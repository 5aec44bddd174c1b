"""Reads of model versions: the live one, the table of every version with its metrics (a
candidate the gate rejected shows the gate's), and whether a version ever went live."""

from __future__ import annotations

from dataclasses import dataclass

from django.core.paginator import Page, Paginator
from django.db.models import Q

from annotations.models import Judgement, Taxonomy
from models_app.models import Deployment, ModelVersion, TrainingRun
from models_app.siamese.evaluation import SUITE_SETS
from models_app.siamese.ranker.model import MIN_EXAMPLES
from models_app.siamese.towers import title_tower_check
from models_app.training.selectors.charts import mean_or_none
from models_app.training.selectors.reports import suite_key_metrics, suite_primary

VERSIONS_PER_PAGE = 50


def pretrained_tower_get() -> dict:
    """What a new taxonomy's tower starts from: the title tower, or the wheel's MiniLM as it
    comes and why (a trained part missing, damaged or made for another base)."""
    return title_tower_check()


def taxonomies_for_models() -> list[Taxonomy]:
    """Every taxonomy, by slug: the page's switcher (there are a handful)."""
    return list(Taxonomy.objects.order_by("slug").only("id", "slug", "name"))


def live_version_get(*, taxonomy: Taxonomy) -> ModelVersion | None:
    deployment = (
        Deployment.objects.filter(taxonomy=taxonomy)
        .select_related("index_build__model_version__parent__taxonomy")
        .first()
    )
    if deployment is None:
        return None
    version = deployment.index_build.model_version
    version.taxonomy = taxonomy  # for its label, without another query
    return version


@dataclass(frozen=True)
class VersionRow:
    version: ModelVersion
    is_live: bool
    primary: float | None
    accuracy: dict[str, float | None]
    # False for a candidate that never went live (the gate rejected it, or its run failed or
    # is still going): there is nothing to roll back *to*.
    was_live: bool = True
    # Where the figures come from: "build" (the version's own evaluation when it was made),
    # "gate" (a fine-tune's candidate as its gate measured it) or "" (not measured).
    measured_by: str = ""
    # A never-live candidate's gate reasons, and its run: why a higher mean did not go live.
    rejected_because: tuple[str, ...] = ()
    run_id: int | None = None

    @property
    def figures(self) -> list[tuple[str, float | None]]:
        """Accuracy per test set in the table's column order."""
        return [(name, self.accuracy.get(name)) for name in SUITE_SETS]


def never_live_version_ids(*, taxonomy: Taxonomy) -> set[int]:
    """Versions that never served: a fine-tune's candidate whose run was not promoted, and a
    build's version whose run did not succeed (it stopped after storing it, before going
    live), unless they went live all the same (``went_live_at``: a first start that made an
    interrupted build's version live, a run that finished after it was given up on) or a
    rollback made them live since. Imported versions go live as they are made."""
    runs = (
        TrainingRun.objects.filter(taxonomy=taxonomy)
        .exclude(model_version=None)
        .filter(model_version__went_live_at=None)
    )
    candidates = set(
        runs.filter(
            Q(kind=TrainingRun.Kind.FINETUNE) & ~Q(status=TrainingRun.Status.PROMOTED)
            | Q(kind=TrainingRun.Kind.BUILD) & ~Q(status=TrainingRun.Status.SUCCEEDED)
        ).values_list("model_version_id", flat=True)
    )
    rolled_back_to = set(
        TrainingRun.objects.filter(
            taxonomy=taxonomy,
            kind=TrainingRun.Kind.ROLLBACK,
            status=TrainingRun.Status.SUCCEEDED,
            model_version_id__in=candidates,
        ).values_list("model_version_id", flat=True)
    )
    return candidates - rolled_back_to


def model_version_was_live(version: ModelVersion) -> bool:
    return version.id not in never_live_version_ids(taxonomy=version.taxonomy)


def model_versions_page(
    *, taxonomy: Taxonomy, live: ModelVersion | None, page: str | int | None
) -> Page:
    """The taxonomy's versions, newest first, a page at a time, as ``VersionRow``s."""
    versions = (
        ModelVersion.objects.filter(taxonomy=taxonomy)
        .select_related("taxonomy", "parent__taxonomy")
        .order_by("-number")
    )
    versions_page = Paginator(versions, VERSIONS_PER_PAGE).get_page(page)
    never_live = never_live_version_ids(taxonomy=taxonomy)
    runs_of = dict(
        TrainingRun.objects.filter(
            model_version_id__in=[v.id for v in versions_page.object_list if v.id in never_live],
            kind=TrainingRun.Kind.FINETUNE,
        )
        .order_by("id")
        .values_list("model_version_id", "id")
    )
    rows = []
    for version in versions_page.object_list:
        is_live = live is not None and version.id == live.id
        primary, accuracy, measured_by = version_measured(version)
        rows.append(
            VersionRow(
                version=version,
                is_live=is_live,
                primary=primary,
                accuracy=accuracy,
                was_live=is_live or version.id not in never_live,
                measured_by=measured_by,
                rejected_because=gate_rejection(version) if version.id in never_live else (),
                run_id=runs_of.get(version.id),
            )
        )
    versions_page.object_list = rows
    return versions_page


def version_measured(version: ModelVersion) -> tuple[float | None, dict, str]:
    """A version's frozen-suite mean and accuracy per test, and who measured them: its own
    evaluation ("build"), else the gate that compared it ("gate"), else nobody ("")."""
    primary, accuracy = suite_primary(version), suite_key_metrics(version)
    if primary is not None:
        return primary, accuracy, "build"
    gate = gate_candidate_metrics(version)
    if gate:
        accuracy = {name: gate.get(name) for name in SUITE_SETS}
        return mean_or_none(list(gate.values())), accuracy, "gate"
    return None, accuracy, ""


def gate_rejection(version: ModelVersion) -> tuple[str, ...]:
    """The reasons a candidate's gate rejected it (none for one it promoted or never gated)."""
    gate = (version.metrics or {}).get("gate") or {}
    if gate.get("decision") != "reject":
        return ()
    return tuple(str(reason) for reason in gate.get("reasons") or ())


def gate_candidate_metrics(version: ModelVersion) -> dict[str, float]:
    """A fine-tune candidate's accuracy per frozen test as its gate measured it (the search as
    served, over the members of the gate's day); empty for a version no gate measured."""
    rows = ((version.metrics or {}).get("gate") or {}).get("metrics") or []
    return {
        row["name"]: row["candidate"]
        for row in rows
        if row.get("suite") == "frozen" and row.get("name") in SUITE_SETS and "candidate" in row
    }


def model_version_get(*, version_id: int) -> ModelVersion | None:
    return ModelVersion.objects.select_related("taxonomy").filter(id=version_id).first()


@dataclass(frozen=True)
class LiveRanker:
    """What learns the taxonomy's verdicts now, as the Models page says it."""

    label: str  # "starter" before the taxonomy's own fit
    verdicts: int
    fitted_at: object | None
    # Before the taxonomy's own fit: what it waits for, in words.
    waiting_for: str = ""


def live_ranker_get(*, taxonomy: Taxonomy) -> LiveRanker:
    """The taxonomy's live ranker when it ranks for the live model, else the starter."""
    deployment = (
        Deployment.objects.filter(taxonomy=taxonomy).select_related("ranker", "index_build").first()
    )
    ranker = deployment.ranker if deployment is not None else None
    if ranker is None or ranker.model_version_id != deployment.index_build.model_version_id:
        return LiveRanker("the starter ranker (fitted on real labelled titles)", 0, None,
                          _waiting_for(taxonomy, deployment))  # fmt: skip
    ranker.taxonomy = taxonomy
    return LiveRanker(ranker.label, ranker.verdicts, ranker.created_at)


def _waiting_for(taxonomy: Taxonomy, deployment: Deployment | None) -> str:
    """What the taxonomy's first ranker fit waits for (README, "How it learns")."""
    rule = f"the first fit needs {MIN_EXAMPLES} judged texts with a group"
    if (
        deployment is not None
        and deployment.ranker_refused_usable is not None
        and deployment.ranker_refused_model_version_id == deployment.index_build.model_version_id
    ):
        usable = deployment.ranker_refused_usable
        return (
            f"{rule}: {usable} at the last try, {MIN_EXAMPLES - usable} more needed (a text "
            "judged by two curators counts once)"
        )
    given = (
        Judgement.objects.live()
        .filter(review_item__taxonomy=taxonomy, verdict__in=Judgement.FINAL_VERDICTS)
        .exclude(group=None)
        .count()
    )
    return f"{rule}: {given} verdict{'s' if given != 1 else ''} with a group so far"
