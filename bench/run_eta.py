"""How true a build's, a rollback's and a reindex's time left is: the ETA each reports at each
stage against the time the run then actually took, on O*NET with the shipped model.

Imports the bundled O*NET taxonomy with the shipped model live (v1); then, each run executed in
this process as the worker executes it (``training_run_execute``, its progress writer recording
every report): a build of the shipped spec (docs/models/onet.json) with a ``--minutes`` training
budget, which goes live (v2); a rollback to v1; a reindex after ``--members`` new members; a
rollback to v2 and a second reindex, which are expected from their rates and from how much
longer than counted each phase took in the first of their kind. For the first report of each
stage (and training's last) the table gives the ETA written then and the seconds the run
actually had left; the JSON keeps every report and each run's ``eta_report``.

    .venv/bin/python bench/run_eta.py [--minutes 0.5] [--members 20]
        [--results bench/results/run_eta.json]

Scratch PostgreSQL database (siamweb_bench_<pid>, dropped at exit), Celery's in-memory broker.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _pg  # no Django yet
from bench.finetune_eta import print_shown, write_results

ROOT = Path(__file__).resolve().parent.parent


def add_members(taxonomy, count: int, *, start: int) -> None:
    """``count`` new members as an admin adds them: O*NET titles with a word more."""
    from annotations.models import Group, Member

    groups = list(Group.objects.filter(taxonomy=taxonomy).order_by("id")[:count])
    Member.objects.bulk_create(
        Member(
            taxonomy=taxonomy,
            group=group,
            text=f"{group.name} trainee {start + i}",
            normalized_text=f"{group.name} trainee {start + i}".lower(),
            source=Member.Source.ADMIN,
        )
        for i, group in enumerate(groups)
    )


def one_run(run, reports: list) -> dict:
    """``run`` executed as the worker executes it, with what its ETA said at each stage."""
    from models_app.models import TrainingRun
    from models_app.training.run_execution import training_run_execute

    reports.clear()
    started = time.monotonic()
    run = training_run_execute(run_id=run.id)
    ended = time.monotonic()
    assert run.status == TrainingRun.Status.SUCCEEDED, run.error
    every = [
        {
            "stage": stage,
            "at_s": round(at - started, 2),
            "fraction": round(fraction, 3),
            "eta_s": None if eta is None else round(eta, 2),
            "actual_left_s": round(ended - at, 2),
        }
        for at, stage, fraction, eta in reports
    ]
    shown, seen = [], set()
    for position, row in enumerate(every):
        following = every[position + 1]["stage"] if position + 1 < len(every) else None
        if row["stage"] not in seen or (row["stage"] == "train" and following != "train"):
            shown.append(row)
        seen.add(row["stage"])
    return {
        "run": run.id,
        "kind": run.kind,
        "run_seconds": round(ended - started, 2),
        "eta_report": run.eta_report,
        "shown": shown,
        "reports": every,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=float, default=0.5, help="the build's training budget")
    parser.add_argument("--members", type=int, default=20, help="new before each reindex")
    parser.add_argument("--results", type=Path, default=ROOT / "bench/results/run_eta.json")
    args = parser.parse_args()
    _pg.scratch_database(broker="memory://")

    import models_app.training.run_execution as execution
    from annotations.services.accounts import user_ensure
    from models_app.training.promotion import live_version, model_version_rollback
    from models_app.training.services.runs import training_run_request

    load_before = _pg.load_average()
    taxonomy = _pg.onet_live()
    admin, _ = user_ensure(username="bench-admin", password="bench-pass-123", admin=True)
    reports: list[tuple[float, str, float, float | None]] = []
    writer = execution.training_run_progress_writer

    def recording(*, run_id: int):
        write = writer(run_id=run_id)

        def progress(stage: str, fraction: float, eta: float | None = None) -> None:
            reports.append((time.monotonic(), stage, fraction, eta))
            write(stage, fraction, eta)

        return progress

    # The worker's own writer, recording what it writes.
    execution.training_run_progress_writer = recording
    spec = json.loads((ROOT / "docs/models/onet.json").read_text())
    spec["training"]["max_minutes"] = args.minutes
    shipped = live_version(taxonomy)

    def build():
        return training_run_request(taxonomy=taxonomy, kind="build", config=spec, enqueue=False)

    def reindex(start: int):
        add_members(taxonomy, args.members, start=start)
        return training_run_request(taxonomy=taxonomy, kind="reindex", enqueue=False)

    steps = [
        ("build", build),
        ("rollback to the shipped model", lambda: model_version_rollback(
            model_version=shipped, actor=admin)),
        ("reindex", lambda: reindex(0)),
        ("rollback to the build", lambda: model_version_rollback(
            model_version=built, actor=admin)),
        ("reindex", lambda: reindex(args.members)),
    ]  # fmt: skip
    runs, built = [], None
    for name, request in steps:
        result = one_run(request(), reports)
        if name == "build":
            built = live_version(taxonomy)
        runs.append({"what": name, **result})
        eta = result["eta_report"]
        print(
            f"\n{name}: {result['run_seconds']:.1f} s; counted {eta['expected_seconds']}; "
            f"took {eta['took_seconds']}; factors {eta['factors']}"
        )
        print_shown(result["shown"])
    write_results(args, "bench/run_eta.py", runs, load_before)


if __name__ == "__main__":
    main()
