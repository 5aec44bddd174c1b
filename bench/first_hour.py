"""The first hour a curator feels, timed with the workers `make run` starts, while a fine-tune
holds the training worker: a probability on every card from the first, the ranker fitted and
live after the 20th verdict, a bulk job started and finished.

O*NET with the shipped model on a scratch PostgreSQL database and Redis; the three workers of
the Procfile (fast, ranker, training) started with the Procfile's own arguments, and beat with
the settings' schedule. The demo's inputs are queued, a fine-tune too long to end during the
measurement is started, then 20 verdicts are given (the demo's titles, confirmed where right);
the seconds from the 20th verdict to a live ranker are what a curator waits. Then a 40-row
bulk job is sent, timed to its start and its end, the fine-tune still training.

    .venv/bin/python bench/first_hour.py

Prints a table and writes bench/results/first_hour.json.
"""

from __future__ import annotations

import io
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402

from bench import _pg  # noqa: E402

REDIS_URL = "redis://127.0.0.1:6379/10"  # not the test suite's databases
OUT = ROOT / "bench" / "results" / "first_hour.json"
WAIT_SECONDS = 600


def procfile_workers() -> dict[str, list[str]]:
    """Each Celery process of the Procfile, as its arguments."""
    found = {}
    for line in (ROOT / "Procfile").read_text().splitlines():
        name, _, command = line.partition(":")
        if "celery" in command:
            args = shlex.split(command.strip())
            args[0] = str(ROOT / ".venv" / "bin" / "celery")
            found[name.strip()] = args
    return found


def wait_for(condition, what: str):
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise SystemExit(f"gave up waiting for {what}")


def main() -> None:
    redis.Redis.from_url(REDIS_URL).flushdb()
    os.environ.update({"SIAMWEB_RETRAIN_MIN_VERDICTS": "1000000"})  # no fine-tune of beat's
    _pg.scratch_database(broker=REDIS_URL)
    from django.db import close_old_connections

    from annotations.models import ReviewItem
    from annotations.services.accounts import user_ensure
    from annotations.services.review.inputs import inputs_submit
    from annotations.services.review.verdicts import judgement_create
    from models_app.bulk.jobs import bulk_job_create
    from models_app.models import BulkJob, Deployment, TrainingRun
    from models_app.training.retraining import finetune_run_request

    taxonomy = _pg.onet_live()
    curator, _ = user_ensure(username="bench-curator", password="bench", admin=False)
    items = inputs_submit(taxonomy=taxonomy, texts=_pg.demo_inputs(), source="api")
    with_probability = sum(
        bool(item.prediction.ranked_groups)
        and item.prediction.ranked_groups[0]["probability"] is not None
        for item in items
    )
    logs = Path(tempfile.mkdtemp(prefix="siamweb-first-hour-"))
    processes = {}
    for name, args in procfile_workers().items():
        extra = [f"--schedule={logs / 'beat-schedule'}"] if name == "beat" else []
        with (logs / f"{name}.log").open("ab") as output:
            processes[name] = subprocess.Popen(
                [*args, *extra], cwd=ROOT, stdout=output, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
    print(f"workers: {', '.join(processes)}; logs in {logs}", flush=True)
    try:
        run = finetune_run_request(
            taxonomy=taxonomy, trigger="manual", config={"training": {"max_steps": 10_000_000}}
        )

        def training():
            run.refresh_from_db()
            return run.status == TrainingRun.Status.RUNNING and run.stage == "train"

        wait_for(training, "the fine-tune to train")
        print("fine-tune training", flush=True)
        open_items = list(ReviewItem.objects.filter(taxonomy=taxonomy).order_by("-priority")[:20])
        for item in open_items:
            judgement_create(review_item=item, user=curator, verdict="confirm")
        twentieth = time.monotonic()

        def ranker_live():
            close_old_connections()
            return Deployment.objects.get(taxonomy=taxonomy).ranker

        ranker = wait_for(ranker_live, "a live ranker")
        ranker_seconds = time.monotonic() - twentieth
        print(
            f"ranker {ranker.label} live {ranker_seconds:.1f} s after the 20th verdict", flush=True
        )

        rows = "\n".join(_pg.demo_inputs()[:40]).encode()
        sent = time.monotonic()
        job = bulk_job_create(
            taxonomy=taxonomy, upload=io.BytesIO(rows), filename="titles.txt", user=curator
        )

        def job_status(*statuses):
            def check():
                job.refresh_from_db()
                return job.status in statuses

            return check

        wait_for(job_status("running", "succeeded"), "the bulk job to start")
        started = time.monotonic() - sent
        wait_for(job_status("succeeded"), "the bulk job to finish")
        finished = time.monotonic() - sent
        run.refresh_from_db()
        report = {
            "machine": _pg.machine(),
            "cards_with_a_probability": f"{with_probability} of {len(items)}",
            "ranker_live_after_20th_verdict_seconds": round(ranker_seconds, 1),
            "bulk_job_started_seconds": round(started, 1),
            "bulk_job_finished_seconds": round(finished, 1),
            "bulk_rows": job.rows_done,
            "finetune_still_training": run.status == TrainingRun.Status.RUNNING,
            "bulk_status": BulkJob.Status(job.status).label,
        }
    finally:
        for process in processes.values():
            subprocess.run(["kill", "-TERM", f"-{process.pid}"], check=False)
        for process in processes.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                subprocess.run(["kill", "-KILL", f"-{process.pid}"], check=False)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2))
    for key, value in report.items():
        print(f"{key:42} {value}")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
