"""Corrigibility on real verdicts (``bench/corrigibility.py``, its main mode): JobBERT's curator
stream judged over the REST API, on ESCO or on O*NET.

Issue #20's main mode. ESCO is imported in its own format; the starting model is the tower
(``--start pretrained``: all-MiniLM-L6-v2 as a new taxonomy serves it; or ``--start FOLDER``: a
tower trained on ESCO, e.g. by `manage.py train esco --spec tower` or bench/device/). With
``--taxonomy onet`` the bundled O*NET is imported as `make run` does, the shipped student live
(``--start`` defaults to ``data/models/onet``), and the JobBERT titles are labelled through the
ESCO-O*NET crosswalk (``bench/ranker.onet_taxonomy``). ``--traffic N`` sends the first N
dev-unseen titles in as inputs nobody judges before round 1, so that the gate's real-traffic
check (``gate.Comparison.answers_moved``) has unjudged answers to weigh. Then, per
round, ``--round-size`` titles of the curator stream (bench/jobbert_data.py) go in through
``POST /api/v1/taxonomies/esco/inputs`` and a curator judges every review item through
``POST /api/v1/judgements``: confirm when the top group is the title's occupation, else reassign
to it. Right after the last verdict the script plays the workers: any run waiting, the ranker's
refit on the verdicts (``ranker_fit``, as the ranker worker does seconds after them), then the
fine-tune the product would run (``finetune_run_request``), gated and promoted or rejected, and
for a promoted model the ranker's refit for it. Never-judged accuracy after each round is paired
with round 0's on the same titles (95% bootstrap interval, McNemar's p). Django's test client
calls the API in-process (same views and services, no network).

Measured per round (round 0: the starting model): never-judged acc@1 on dev-unseen, *served*
(``rank_taxonomy_groups``, curator members in the index) and *by the model alone* (the live index's
taxonomy members only); the round's inputs by the model alone (no curator member, their own
neither); the gate's decision, its reasons, its rows (held-out verdicts, frozen suite), the share
of all verdicts right by the model alone (live against candidate) and the real-traffic check;
last verdict → run done.

    .venv/bin/python bench/corrigibility.py --start var/towers/esco-h200 [--rounds 4]
    .venv/bin/python bench/corrigibility.py --taxonomy onet --traffic 2000 [--rounds 3]

Scratch PostgreSQL database (dropped at exit), Celery's in-memory broker. Prints a table and
writes bench/results/corrigibility_real.json and .svg.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._pg import machine, scratch_database  # noqa: E402
from bench.jobbert_data import (  # noqa: E402
    SHARED_DATA,
    DataError,
    LabelledTitle,
    check_labels,
    esco_groups,
    jobbert_split,
)
from bench.ranker import onet_taxonomy  # noqa: E402
from bench.real_accuracy import paired  # noqa: E402

DEPTH = 40  # nearest members looked at when curator members are dropped from the hits


def labelled_titles(name: str, data: Path) -> tuple[list, list]:
    """(dev-unseen, curator stream) of JobBERT's titles, each with its group's code there."""
    dev, stream = jobbert_split(data)
    if name == "esco":
        check_labels(dev + stream, set(esco_groups(data)))
        return dev, stream
    onet = onet_taxonomy(data)
    return (
        [LabelledTitle(text, onet.codes[g]) for text, g in onet.dev],
        [LabelledTitle(text, onet.codes[g]) for text, g in onet.stream],
    )


def start_model(taxonomy, start: str):
    from models_app.models import TrainingRun
    from models_app.siamese.specs import PRETRAINED_SPEC
    from models_app.training.run_execution import training_run_execute
    from models_app.training.services.builds import model_version_import
    from models_app.training.services.indexes import deployment_activate, index_build_create
    from models_app.training.services.runs import training_run_request

    if start == "pretrained":
        run = training_run_request(
            taxonomy=taxonomy, kind=TrainingRun.Kind.BUILD, config=PRETRAINED_SPEC, enqueue=False
        )
        run = training_run_execute(run_id=run.id)
        if run.status != TrainingRun.Status.SUCCEEDED:
            raise SystemExit(f"the starting build failed: {run.error}")
        return run.model_version
    version = model_version_import(taxonomy=taxonomy, folder=Path(start))
    deployment_activate(index_build=index_build_create(model_version=version))
    return version


class Curator:
    def __init__(self, slug: str, username: str = "bench-curator") -> None:
        self.slug = slug
        from django.test import Client
        from rest_framework.authtoken.models import Token

        from annotations.services.accounts import user_ensure

        user, _ = user_ensure(username=username, password="bench-pass-123", admin=False)
        token = Token.objects.create(user=user)
        self.client = Client(HTTP_HOST="localhost", HTTP_AUTHORIZATION=f"Token {token.key}")

    def submit(self, texts: list[str]) -> list[dict]:
        results = []
        for start in range(0, len(texts), 100):
            response = self.client.post(
                f"/api/v1/taxonomies/{self.slug}/inputs",
                {"texts": texts[start : start + 100]},
                content_type="application/json",
            )
            assert response.status_code == 201, response.content[:300]
            results += response.json()["results"]
        return results

    def judge(self, item: dict, gold: int) -> str:
        verdict, response = self._post_verdict(item, gold)
        if response.status_code == 400 and "prediction" in response.json():
            # Predicted again since it was sent (a verdict's member changed its answer):
            # a curator sees the new card and judges that one.
            item = self.client.get(f"/api/v1/review-items/{item['id']}").json()
            verdict, response = self._post_verdict(item, gold)
        assert response.status_code == 201, response.content[:300]
        return verdict

    def _post_verdict(self, item: dict, gold: int):
        ranked = item["prediction"]["ranked_groups"]
        verdict = "confirm" if ranked and ranked[0]["group_id"] == gold else "reassign"
        response = self.client.post(
            "/api/v1/judgements",
            {
                "review_item": item["id"],
                "verdict": verdict,
                "group": gold,
                "prediction": item["prediction"]["id"],
            },
            content_type="application/json",
            HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()),
        )
        return verdict, response


def served(taxonomy, texts: list[str], gold: list[int]) -> np.ndarray:
    """Per title, whether the answer served (as the API gives it) is its group."""
    from models_app.serving.normalize import rank_taxonomy_groups

    hits = []
    for start in range(0, len(texts), 500):
        results = rank_taxonomy_groups(taxonomy, texts[start : start + 500], k=1)
        hits += [
            bool(r.groups) and r.groups[0].group_id == g
            for r, g in zip(results, gold[start : start + 500], strict=True)
        ]
    return np.array(hits, dtype=bool)


def model_alone(taxonomy, texts: list[str], gold: list[int]) -> np.ndarray:
    """Per title, whether the live model with no curator member (its index's taxonomy members
    only) puts its group first."""
    from annotations.models import Member
    from models_app.serving.engines import live_engine

    engine = live_engine(taxonomy)
    taxonomy_members = dict(
        Member.objects.filter(taxonomy=taxonomy, source=Member.Source.TAXONOMY).values_list(
            "id", "group_id"
        )
    )
    hits = []
    for start in range(0, len(texts), 500):
        found = engine.nearest_members(texts[start : start + 500], DEPTH)
        for row, g in zip(found, gold[start : start + 500], strict=True):
            top = next((taxonomy_members[m] for m, _ in row if m in taxonomy_members), None)
            hits.append(top == g)
    return np.array(hits, dtype=bool)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--taxonomy", choices=("esco", "onet"), default="esco")
    parser.add_argument(
        "--start",
        default=None,
        help="pretrained, or a model's folder (default: pretrained on ESCO, the shipped O*NET "
        "student on O*NET)",
    )
    parser.add_argument("--traffic", type=int, default=0, help="dev titles sent in, never judged")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--round-size", type=int, default=500)
    parser.add_argument("--dev-size", type=int, default=0, help="0: every dev-unseen title")
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--out", default="corrigibility_real")
    parser.add_argument(
        "--finetune-recipe",
        choices=("titles", "pairs"),
        help="how fine-tunes learn the verdicts (default: the product's for the live encoder)",
    )
    args = parser.parse_args()
    if args.start is None:
        args.start = "pretrained" if args.taxonomy == "esco" else str(ROOT / "data/models/onet")
    if args.rounds < 1 or args.round_size < 1 or min(args.dev_size, args.traffic) < 0:
        parser.error("--rounds and --round-size must be at least 1, --dev-size at least 0")
    if args.start != "pretrained" and not Path(args.start).is_dir():
        parser.error(f"--start {args.start!r} is neither 'pretrained' nor a folder")
    try:
        dev, stream = labelled_titles(args.taxonomy, args.data)
    except (DataError, OSError) as exc:
        parser.error(str(exc))
    if args.traffic > len(dev):
        parser.error(f"--traffic {args.traffic}: there are {len(dev)} dev-unseen titles")
    if args.dev_size:
        dev = dev[: args.dev_size]
    if len(stream) < args.rounds * args.round_size:
        parser.error(f"the curator stream holds {len(stream)} titles, fewer than asked for")
    recipe_override = (
        {"training": {"finetune_recipe": args.finetune_recipe}} if args.finetune_recipe else None
    )
    scratch_database()

    from annotations.models import Group
    from annotations.services.taxonomy import taxonomy_import
    from models_app.models import TrainingRun
    from models_app.siamese.text import comparison_key
    from models_app.training import retraining
    from models_app.training.ranker_training import ranker_fit
    from models_app.training.run_execution import training_run_execute

    if args.taxonomy == "esco":
        taxonomy = taxonomy_import(slug="esco", path=args.data / "esco", fmt="esco").taxonomy
    else:
        taxonomy = taxonomy_import(slug="onet", path=ROOT / "data/onet", fmt="onet").taxonomy
    group_of = dict(Group.objects.filter(taxonomy=taxonomy).values_list("code", "id"))
    started = time.perf_counter()
    version = start_model(taxonomy, args.start)
    print(f"starting model {version.label} live in {time.perf_counter() - started:.0f} s")
    dev_texts, dev_gold = [r.text for r in dev], [group_of[r.code] for r in dev]
    curator = Curator(taxonomy.slug)
    if args.traffic:
        # Another client's: one user may have only so many inputs waiting for review.
        Curator(taxonomy.slug, "bench-traffic").submit(dev_texts[: args.traffic])
    first = {
        "served": served(taxonomy, dev_texts, dev_gold),
        "model_alone": model_alone(taxonomy, dev_texts, dev_gold),
    }
    rows = [{"round": 0, "never_judged_served": first["served"].mean(),
             "never_judged_model_alone": first["model_alone"].mean()}]  # fmt: skip
    print(json.dumps(rows[-1]), flush=True)
    seen: set[str] = set()
    # One input per normalized text: the product keeps one input (and one review item) for it.
    queue = [
        r
        for r in stream
        if not (comparison_key(r.text) in seen or seen.add(comparison_key(r.text)))
    ]
    for number in range(1, args.rounds + 1):
        batch = queue[(number - 1) * args.round_size : number * args.round_size]
        texts, gold = [r.text for r in batch], [group_of[r.code] for r in batch]
        items = curator.submit(texts)
        verdicts = [curator.judge(item, g) for item, g in zip(items, gold, strict=True)]
        last_verdict = time.perf_counter()
        for run in TrainingRun.objects.filter(taxonomy=taxonomy, status="queued"):
            training_run_execute(run_id=run.id)  # the verdicts' reindex
        # The ranker worker's refit, due seconds after the verdicts: the gate weighs moved
        # answers by the live ranker's probabilities, as the product's would be by then.
        ranker_before = ranker_fit(taxonomy=taxonomy)
        run = retraining.finetune_run_request(
            taxonomy=taxonomy,
            trigger=TrainingRun.Trigger.MANUAL,
            enqueue=False,
            config=recipe_override,
        )
        run = training_run_execute(run_id=run.id)
        seconds = time.perf_counter() - last_verdict
        # A promoted model's ranker is refitted for it, as `rankers_due` has the worker do.
        ranker_after = ranker_fit(taxonomy=taxonomy) if run.status == "promoted" else None
        report = run.gate_report or {}
        moved = report.get("answers_moved") or {}
        rows.append({
            "round": number,
            "verdicts": len(verdicts),
            "reassigned": verdicts.count("reassign"),
            "status": run.status,
            "reasons": report.get("reasons", []),
            "gate_rows": report.get("metrics", []),
            "held_out": next(
                ({k: m.get(k) for k in ("live", "candidate", "n", "lost", "gained", "p_worse",
                                        "answered", "model_alone")}
                 for m in report.get("metrics", []) if m["name"] == "held_out_feedback"),
                None,
            ),
            "frozen_held": all(
                m["passed"] for m in report.get("metrics", []) if m["suite"] in ("frozen", "drift")
            ),
            "verdicts_model_alone": report.get("verdicts"),
            "answers_moved": {k: v for k, v in moved.items() if k != "examples"} or None,
            "answers_moved_examples": moved.get("examples", [])[:5],
            "ranker_before_finetune": ranker_before.label if ranker_before else None,
            "ranker_after_finetune": ranker_after.label if ranker_after else None,
            "steps": (run.model_version.metrics or {}).get("steps") if run.model_version else None,
            "last_verdict_to_done_seconds": round(seconds, 1),
            "round_inputs_model_alone": model_alone(taxonomy, texts, gold).mean(),
        })  # fmt: skip
        # Never-judged titles, each measure against round 0 on the same titles.
        for name, measure in (("served", served), ("model_alone", model_alone)):
            hits = measure(taxonomy, dev_texts, dev_gold)
            rows[-1][f"never_judged_{name}"] = hits.mean()
            rows[-1][f"never_judged_{name}_vs_round_0"] = paired(hits, first[name])
        long = ("gate_rows", "answers_moved_examples")
        shown = {k: v for k, v in rows[-1].items() if k not in long}
        print(json.dumps(shown), flush=True)
        write(args.out, args, rows)
    write(args.out, args, rows)
    print(f"\n{'round':>5} {'verdicts':>9} {'status':>9} {'served':>7} {'alone':>7} "
          f"{'inputs alone':>12} {'seconds':>8}")  # fmt: skip
    for r in rows:
        print(f"{r['round']:>5} {r.get('verdicts', ''):>9} {r.get('status', ''):>9} "
              f"{r['never_judged_served']:7.3f} {r['never_judged_model_alone']:7.3f} "
              f"{r.get('round_inputs_model_alone', float('nan')):12.3f} "
              f"{r.get('last_verdict_to_done_seconds', ''):>8}")  # fmt: skip


def write(name: str, args, rows: list[dict]) -> None:
    from models_app.training.charts import Chart, Series, line_chart_svg

    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    payload = {
        "machine": machine(),
        "taxonomy": args.taxonomy,
        "start": args.start,
        "traffic": args.traffic,
        "finetune_recipe": args.finetune_recipe or "the product's",
        "round_size": args.round_size,
        "dev_titles": args.dev_size or "all",
        "rounds": rows,
    }
    (out / f"{name}.json").write_text(json.dumps(payload, indent=2))
    chart = Chart(
        title=f"Real verdicts on {args.taxonomy}: never-judged JobBERT titles, round by round",
        series=[
            Series("never-judged, served", [(r["round"], r["never_judged_served"]) for r in rows]),
            Series(
                "never-judged, model alone",
                [(r["round"], r["never_judged_model_alone"]) for r in rows],
            ),
            Series(
                "round's inputs, model alone",
                [(r["round"], r["round_inputs_model_alone"]) for r in rows if r["round"]],
            ),
        ],
        x_labels={r["round"]: f"round {r['round']}" for r in rows},
        markers=[
            (r["round"], "promote" if r["status"] == "promoted" else "reject", r["status"])
            for r in rows
            if r["round"]
        ],
        y_bounds=(0.0, 1.0),
    )
    (out / f"{name}.svg").write_text(str(line_chart_svg(chart)))


if __name__ == "__main__":
    main()
