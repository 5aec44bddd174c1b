"""How true a fine-tune's time left is: the ETA it reports at each stage against the time the
run then actually took, on O*NET with the shipped model.

Imports the bundled O*NET taxonomy with the shipped model live; then ``--runs`` times: gives
``--verdicts`` new curator verdicts (O*NET alternate titles in job-ad noise, a third with typos,
each put in its own group: confirmed where the model was right, reassigned where not) and runs
one fine-tune in this process as the worker would (``training_run_execute``), its progress
writer recording every report. The first run's ETA comes from rates timed at its start; the
next ones' also from how much longer each stage took than counted in the run before. For the
first report of each stage (and training's last of each phase) the table gives the ETA written
then and the seconds the run actually had left; the JSON keeps every report, the rates, the
factors and what each stage took.

    .venv/bin/python bench/finetune_eta.py [--runs 2] [--verdicts 60] [--minutes 1.0]
        [--results bench/results/finetune_eta.json]

``--minutes``: the fine-tune's time budget (SIAMWEB_FINETUNE_MAX_MINUTES, 3 in production);
the stages after training take what they take whatever it is. Scratch PostgreSQL database
(siamweb_bench_<pid>, dropped at exit), Celery's in-memory broker.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _pg  # no Django yet: the time budget is set first

ROOT = Path(__file__).resolve().parent.parent


def verdicts(taxonomy, count: int, user, *, seed: int) -> int:
    """``count`` verdicts on noisy O*NET titles, each put in its own group; returns how many
    were reassignments."""
    from annotations.models import Group, Input
    from annotations.services.review.inputs import inputs_submit
    from annotations.services.review.verdicts import judgement_create
    from bench.onet_data import onet_members
    from models_app.siamese.augment.extra_words import ExtraWords
    from models_app.siamese.augment.typos import add_typos_exact
    from models_app.siamese.text import comparison_key

    rng = random.Random(seed)
    members, codes = onet_members()
    words = ExtraWords("train")
    by_code = {g.code: g for g in Group.objects.filter(taxonomy=taxonomy)}
    sent = set(Input.objects.filter(taxonomy=taxonomy).values_list("normalized_text", flat=True))
    chosen: dict[str, Group] = {}
    while len(chosen) < count:
        group, title = rng.choice(members)
        text = words.decorate(title, rng)
        if rng.random() < 0.33:
            text = add_typos_exact(text, rng)
        text = text[:200]
        if comparison_key(text) not in sent:  # each run's verdicts are new
            chosen.setdefault(text, by_code[codes[group]])
    reassigned = 0
    for item in inputs_submit(taxonomy=taxonomy, texts=list(chosen), source="api"):
        gold = chosen[item.input.text]
        verdict = "confirm" if item.top_group_id == gold.id else "reassign"
        reassigned += verdict == "reassign"
        judgement_create(review_item=item, user=user, verdict=verdict, group=gold)
    return reassigned


def one_run(taxonomy, reports: list) -> dict:
    """A fine-tune executed as the worker executes it, with what its ETA said at each stage."""
    from models_app.models import TrainingRun
    from models_app.training.retraining import finetune_run_request
    from models_app.training.run_execution import training_run_execute

    reports.clear()
    run = finetune_run_request(taxonomy=taxonomy, trigger="manual", enqueue=False)
    started = time.monotonic()
    run = training_run_execute(run_id=run.id)
    ended = time.monotonic()
    assert run.status in (TrainingRun.Status.PROMOTED, TrainingRun.Status.REJECTED), run.error
    every = [
        {
            "stage": stage,
            "at_s": round(at - started, 1),
            "fraction": round(fraction, 3),
            "eta_s": None if eta is None else round(eta, 1),
            "actual_left_s": round(ended - at, 1),
        }
        for at, stage, fraction, eta in reports
    ]
    # The table: each stage's first report, and training's last of each phase.
    shown, seen = [], set()
    for position, row in enumerate(every):
        following = every[position + 1]["stage"] if position + 1 < len(every) else None
        if row["stage"] not in seen or (row["stage"] == "train" and following != "train"):
            shown.append(row)
        seen.add(row["stage"])
    report = run.gate_report
    return {
        "run": run.id,
        "outcome": run.status,
        "run_seconds": round(ended - started, 1),
        "eta": report.get("eta"),
        "stage_seconds": report.get("stage_seconds"),
        "shown": shown,
        "reports": every,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--verdicts", type=int, default=60, help="before each run")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--minutes", type=float, default=1.0)
    parser.add_argument("--results", type=Path, default=ROOT / "bench/results/finetune_eta.json")
    args = parser.parse_args()
    os.environ["SIAMWEB_FINETUNE_MAX_MINUTES"] = str(args.minutes)
    _pg.scratch_database(broker="memory://")

    import models_app.training.run_execution as execution
    from annotations.services.accounts import user_ensure

    load_before = _pg.load_average()
    taxonomy = _pg.onet_live()
    user, _ = user_ensure(username="bench-curator", password="bench-pass-123", admin=False)
    reports: list[tuple[float, str, float, float | None]] = []
    writer = execution.training_run_progress_writer

    def recording(*, run_id: int):
        write = writer(run_id=run_id)

        def progress(stage: str, fraction: float, eta: float | None = None) -> None:
            reports.append((time.monotonic(), stage, fraction, eta))
            write(stage, fraction, eta)

        return progress

    # The worker's own writer, recording what it writes: each run executes as the worker's does.
    execution.training_run_progress_writer = recording
    runs = []
    for number in range(args.runs):
        reassigned = verdicts(taxonomy, args.verdicts, user, seed=17 + number)
        print(f"\nrun {number + 1}: {args.verdicts} new verdicts, {reassigned} reassignments")
        result = one_run(taxonomy, reports)
        runs.append({"verdicts": args.verdicts, "reassigned": reassigned, **result})
        print(
            f"fine-tune {result['outcome']} in {result['run_seconds']:.1f} s; stages took "
            f"{result['stage_seconds']}; factors {result['eta'] and result['eta'].get('factors')}"
        )
        print_shown(result["shown"])
    write_results(args, "bench/finetune_eta.py", runs, load_before)


def print_shown(shown: list[dict]) -> None:
    """What the run's page showed as it went, beside the time that was really left."""
    print(f"{'stage':<10} {'at s':>7} {'done':>6} {'ETA s':>8} {'actual left s':>14}")
    for row in shown:
        eta = "—" if row["eta_s"] is None else f"{row['eta_s']:.1f}"
        print(
            f"{row['stage']:<10} {row['at_s']:>7.1f} {row['fraction']:>6.2f} {eta:>8} "
            f"{row['actual_left_s']:>14.1f}"
        )


def write_results(args, script: str, runs: list[dict], load_before) -> None:
    results = {
        "command": " ".join([script, *sys.argv[1:]]),
        "machine": _pg.machine(),
        "budget_minutes": args.minutes,
        "runs": runs,
        "load_average": {"before": load_before, "after": _pg.load_average()},
    }
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(results, indent=2))
    print(f"\nwrote {args.results}")


if __name__ == "__main__":
    main()
