"""Corrigibility on O*NET, the synthetic mode (``bench/corrigibility.py --mode onet``): do
curators' verdicts, given through the REST API, teach the model?

GitHub issue #5, point 8. Labelled realistic inputs are held out of the taxonomy, and curators
are played through the REST API, round after round, with a fine-tune after each round:

1. Data. A seeded sample of O*NET alternate titles (from occupations with at least
   ``--min-titles`` titles, each title naming one occupation only, at most a third of an
   occupation's alternates) is taken out of the taxonomy; the rest is imported in the O*NET
   format (occupations, alternate titles, related occupations) from a scratch folder. Each
   held-out title becomes a realistic input the way the other benchmarks make them
   (``bench/_pg.realistic_inputs``): job-ad words around it from the *train* half of
   ``augment.ExtraWords`` with probability 0.8, a typo (``add_typos_exact``) with probability
   0.33. Its gold label is the title's occupation. The inputs are split into a *corrected* pool
   (``--round-size`` per round, sent to the curators) and a *never-seen* set (``--never-seen``,
   only measured, never sent anywhere).
2. Model. The shipped model was trained on every O*NET title, held-out ones included, so it is
   not used: a starting model is trained here on the reduced taxonomy (the recipe of
   ``docs/models/onet.json`` for ``--minutes`` of CPU instead of 35) through a BUILD run,
   ``training_run_request(..., enqueue=False)`` + ``training_run_execute``, and made live.
3. Rounds. Per round, the round's inputs go in through POST /api/v1/taxonomies/<slug>/inputs
   (token auth) and two curators give a verdict on every review item through POST
   /api/v1/judgements (an Idempotency-Key each): "confirm" when the predicted top group is the
   gold one, else "reassign" to the gold group. Django's test client calls the API in-process
   (the same views, serializers and services as over HTTP, no network). Right after the round's
   last verdict the benchmark acts as the ``training`` worker: it runs any run waiting, asks for
   a fine-tune (``finetune_run_request``, trigger "manual") and runs it in-process
   (``training_run_execute``) to PROMOTED or REJECTED.

Measured per round (round 0: the starting model, before any verdict): the corrected inputs
by the model itself, their variants, the never-seen inputs, the round's inputs on arrival, the
frozen suite, and the seconds from the last verdict to the promotion; each measure is defined in
``bench/corrigibility_measures.py``. The runs of steps 2 and 3 are carried out by
``bench/corrigibility_training.py``.

    .venv/bin/python bench/corrigibility.py --mode onet [--rounds 4] [--round-size 500]
        [--never-seen 1000] [--minutes 5] [--eval-every 250] [--seed 13] [--keep-artifacts]
        [--skip-retrain 1,3]

Runs against a scratch PostgreSQL database (siamweb_bench_<pid>, dropped at exit; the server is
BENCH_POSTGRES_URL, default the local postgres superuser) with Celery's in-memory broker and
SIAMWEB_DOUBLE_REVIEW_PERCENT=0; the scratch artifacts folder (a model, an index and a
half-gigabyte checkpoint per run) is removed at exit unless --keep-artifacts. Prints a table per
round and writes bench/results/corrigibility.json and bench/results/corrigibility.svg (the
figures in docs/benchmarks.md). About 40 minutes on 2 CPU cores with the defaults.
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


from bench.corrigibility_data import (
    SLUG,
    Example,
    held_out_titles,
    realistic_examples,
    realistic_variants,
    reduced_onet,
)
from bench.corrigibility_measures import ModelAlone, frozen_suite, live_version, served_top1, share
from bench.corrigibility_report import COLUMNS, table_row, targets, write_svg
from bench.corrigibility_training import ENCODER, TRAINING, build_starting_model, retrain

# --- Django from here on ---------------------------------------------------------------------


def django_setup() -> None:
    from bench import _pg

    os.environ["SIAMWEB_DOUBLE_REVIEW_PERCENT"] = "0"  # one verdict finishes an item
    _pg.scratch_database(broker="memory://")


class Curators:
    """Curators with API tokens, taking turns; an admin who asks for the fine-tunes."""

    def __init__(self, count: int = 2) -> None:
        from django.test import Client
        from rest_framework.authtoken.models import Token

        from annotations.services.accounts import user_ensure

        self.clients = []
        for number in range(1, count + 1):
            user, _ = user_ensure(
                username=f"bench-curator-{number}", password="bench-pass-123", admin=False
            )
            token = Token.objects.create(user=user)
            self.clients.append(
                Client(HTTP_HOST="localhost", HTTP_AUTHORIZATION=f"Token {token.key}")
            )
        self.admin, _ = user_ensure(username="bench-admin", password="bench-pass-123", admin=True)

    def submit(self, texts: list[str], *, batch: int = 100) -> list[dict]:
        """POST the texts as inputs; the review item (with its prediction) of each, in order."""
        results = []
        for start in range(0, len(texts), batch):
            chunk = texts[start : start + batch]
            response = self.clients[0].post(
                f"/api/v1/taxonomies/{SLUG}/inputs",
                {"texts": chunk},
                content_type="application/json",
            )
            assert response.status_code == 201, (response.status_code, response.content[:500])
            found = response.json()["results"]
            assert len(found) == len(chunk), "the inputs were meant to be distinct"
            results += found
        return results

    def judge(self, turn: int, item: dict, gold_group_id: int) -> str:
        """Confirm the predicted top group when it is the gold one, else reassign to gold."""
        ranked = item["prediction"]["ranked_groups"]
        top = ranked[0]["group_id"] if ranked else None
        verdict = "confirm" if top == gold_group_id else "reassign"
        response = self.clients[turn % len(self.clients)].post(
            "/api/v1/judgements",
            {
                "review_item": item["id"],
                "verdict": verdict,
                "group": gold_group_id,
                "prediction": item["prediction"]["id"],
            },
            content_type="application/json",
            HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()),
        )
        assert response.status_code == 201, (response.status_code, response.content[:500])
        return verdict


# --- the benchmark ---------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--round-size", type=int, default=500)
    parser.add_argument("--never-seen", type=int, default=1000)
    parser.add_argument("--minutes", type=float, default=5.0, help="the starting model's budget")
    parser.add_argument(
        "--eval-every", type=int, default=250, help="the starting model's steps between evaluations"
    )
    parser.add_argument("--min-titles", type=int, default=5)
    parser.add_argument(
        "--keep-artifacts", action="store_true", help="keep the scratch models and indexes"
    )
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument(
        "--no-retrain",
        action="store_true",
        help="verdicts only, no fine-tune (measures what the member index alone does)",
    )
    parser.add_argument(
        "--skip-retrain",
        default="",
        help="comma-separated rounds with verdicts but no fine-tune after them: the next run "
        "learns their verdicts too, as a run after a rejected one does",
    )
    args = parser.parse_args()
    pool_size = args.rounds * args.round_size
    try:
        skipped = {int(part) for part in args.skip_retrain.split(",") if part.strip()}
    except ValueError:
        parser.error(f"--skip-retrain takes round numbers, got {args.skip_retrain!r}")
    if not skipped <= set(range(1, args.rounds + 1)):
        parser.error(f"--skip-retrain rounds must be between 1 and {args.rounds}")
    held_out = held_out_titles(
        count=pool_size + args.never_seen, min_titles=args.min_titles, seed=args.seed
    )
    examples = realistic_examples(held_out, seed=args.seed)
    pool, never_seen = examples[:pool_size], examples[pool_size:]
    variants = realistic_variants(pool, avoid=examples, seed=args.seed + 1)
    folder = reduced_onet(held_out)

    django_setup()
    from bench import _pg

    if not args.keep_artifacts:
        # Every fine-tune leaves a model, an index and a checkpoint of half a gigabyte.
        scratch = os.environ["SIAMWEB_VAR_DIR"]
        atexit.register(lambda: shutil.rmtree(scratch, ignore_errors=True))

    load_before = _pg.load_average()
    from annotations.models import Group
    from annotations.services.taxonomy import taxonomy_import
    from models_app.training.services.training_data import feedback_is_held_out

    started = time.perf_counter()
    report = taxonomy_import(slug=SLUG, path=folder, fmt="onet", name="O*NET less held-out titles")
    taxonomy = report.taxonomy
    shutil.rmtree(folder, ignore_errors=True)
    print(f"imported {report.members_created:,} members ({time.perf_counter() - started:.1f} s)")
    gold = dict(Group.objects.filter(taxonomy=taxonomy).values_list("code", "id"))
    build = build_starting_model(taxonomy, minutes=args.minutes, eval_every=args.eval_every)
    _pg.vacuum_analyze()
    curators = Curators()

    def measure(
        round_number: int,
        corrected: list[Example],
        this_round: list[Example],
        reassigned: set[str],
        extra: dict,
    ) -> dict:
        started = time.perf_counter()
        version = live_version(taxonomy)
        alone = ModelAlone(taxonomy, gold)
        in_round = {e.text for e in this_round}
        variant_hits = served_top1(taxonomy, variants, gold)
        never_hits = served_top1(taxonomy, never_seen, gold)
        never_weights = alone.weights_alone(never_seen)
        variant_weights = alone.weights_alone(variants)
        row = {
            "round": round_number,
            "model": version.label,
            **extra,
            "never_seen": share(never_hits),
            # Served less the curator members (the taxonomy's members only, trigram term on),
            # then less the trigram term too: what each part of the served search adds.
            "never_seen_weights_alone": share(never_weights),
            "never_seen_embedding_alone": share(alone.embedding_alone(never_seen)),
            # Fresh job-ad noise around the titles corrected so far: does a fix reach similar
            # inputs, as served (curator members included)? And around every pool title, a
            # fixed set: the never-seen inputs whose titles come back.
            "variants": share(variant_hits[: len(corrected)]),
            "variants_every_title": share(variant_hits),
            "variants_every_title_weights_alone": share(variant_weights),
            # Both fixed sets together: an unjudged input for every held-out title.
            "unjudged_every_title": share(never_hits + variant_hits),
            "unjudged_every_title_weights_alone": share(never_weights + variant_weights),
            "frozen": frozen_suite(taxonomy, version),
        }

        def of(hits: list[bool], keep) -> float | None:
            return share([hit for e, hit in zip(corrected, hits, strict=True) if keep(e)])

        for name, hits in (
            ("by_itself", alone.beside_others(corrected)),
            ("weights_alone", alone.weights_alone(corrected)),
            ("embedding_alone", alone.embedding_alone(corrected)),
        ):
            row[f"all_{name}"] = share(hits)
            row[f"round_{name}"] = of(hits, lambda e: e.text in in_round)
            row[f"reassigned_{name}"] = of(hits, lambda e: e.text in reassigned)
            row[f"round_reassigned_{name}"] = of(
                hits, lambda e: e.text in reassigned and e.text in in_round
            )
            # The gate holds a fixed fifth of new judged texts out of a fine-tune's first
            # phase and measures them there; the catch-up phase then learns them.
            row[f"trained_on_{name}"] = of(hits, lambda e: not feedback_is_held_out(e.text))
            row[f"kept_out_{name}"] = of(hits, lambda e: feedback_is_held_out(e.text))
        row["measure_seconds"] = round(time.perf_counter() - started, 1)
        return row

    # Round 0, before any verdict: the "corrected" columns are over the whole pool, every
    # input of which the starting model has never seen.
    rows = [measure(0, pool, pool, set(), {"verdicts": 0, "build": build.model_version.metrics})]
    _pg.print_table([table_row(rows[-1])], COLUMNS)
    corrected: list[Example] = []
    reassigned_texts: set[str] = set()
    for round_number in range(1, args.rounds + 1):
        batch = pool[(round_number - 1) * args.round_size : round_number * args.round_size]
        started = time.perf_counter()
        items = curators.submit([e.text for e in batch])
        arrival = [
            bool(item["prediction"]["ranked_groups"])
            and item["prediction"]["ranked_groups"][0]["group_id"] == gold[e.code]
            for item, e in zip(items, batch, strict=True)
        ]
        submit_seconds = time.perf_counter() - started
        started = time.perf_counter()
        verdicts = Counter()
        for turn, (item, example) in enumerate(zip(items, batch, strict=True)):
            verdict = curators.judge(turn, item, gold[example.code])
            verdicts[verdict] += 1
            if verdict == "reassign":
                reassigned_texts.add(example.text)
        last_verdict_at = time.perf_counter()
        verdict_seconds = last_verdict_at - started
        corrected += batch
        retrained = (
            None
            if args.no_retrain or round_number in skipped
            else retrain(taxonomy, curators.admin, last_verdict_at=last_verdict_at)
        )
        row = measure(
            round_number,
            corrected,
            batch,
            reassigned_texts,
            {
                "verdicts": sum(verdicts.values()),
                "reassigned": verdicts["reassign"],
                "arrival_accuracy": share(arrival),
                "submit_seconds": round(submit_seconds, 1),
                "verdict_seconds": round(verdict_seconds, 1),
                "retrain": retrained,
            },
        )
        rows.append(row)
        print()
        _pg.print_table([table_row(r) for r in rows], COLUMNS)
        if retrained:
            print(
                f"round {round_number}: run {retrained['status']} "
                f"(gate: {retrained['decision']}; {'; '.join(retrained['reasons'])})"
            )
        save(args, rows, load_before, pool_size)


def save(args, rows: list[dict], load_before: list[float], pool_size: int) -> None:
    from bench import _pg

    machine = _pg.machine()
    results = {
        "machine": machine,
        "load_average_before": load_before,
        "load_average_after": _pg.load_average(),
        "command": "bench/corrigibility.py --mode onet " + " ".join(sys.argv[1:]),
        "settings": {
            "rounds": args.rounds,
            "round_size": args.round_size,
            "never_seen": args.never_seen,
            "corrected_pool": pool_size,
            "starting_model_minutes": args.minutes,
            "starting_model_eval_every": args.eval_every,
            "min_titles": args.min_titles,
            "seed": args.seed,
            "retrain": not args.no_retrain,
            "skip_retrain": args.skip_retrain,
            "encoder": ENCODER,
            "training": TRAINING,
        },
        "targets": targets(rows) if not args.no_retrain and len(rows) > 1 else None,
        "rounds": rows,
    }
    _pg.write_results("corrigibility", results)
    write_svg(
        rows,
        _pg.ROOT / "bench" / "results" / "corrigibility.svg",
        f"Corrigibility on O*NET: {args.round_size} verdicts a round, a fine-tune after each"
        + (f" but round {args.skip_retrain}" if args.skip_retrain else ""),
    )


if __name__ == "__main__":
    main()
