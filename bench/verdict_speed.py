"""Server time of a curator's verdict on PostgreSQL, with O*NET and the shipped model live.

Submits realistic inputs (data/demo_inputs.txt plus O*NET alternate titles in job-ad noise, a
third with typos) through ``inputs_submit``, logs a curator in with Django's test client and
works the review card the way the browser does: POST /review/items/<id>/judge with the htmx
header, whose response is the panel holding the next card (so each figure includes claiming and
rendering that card). The verdicts mix confirm, false match, reassign and none; a false match
leaves the item waiting for its group, and the curator then reassigns it or says none, as on the
page. The time is wall time around the test client's call, in this process: server time with no
network. Two more rows split that time: the next card alone (GET /review/ with the htmx header,
a fresh claim each time) and the verdict alone (``judgement_create``, no HTTP, no next card).
Then verdicts through the REST endpoint POST /api/v1/judgements (token auth, an
Idempotency-Key each), when it exists.

    .venv/bin/python bench/verdict_speed.py [--inputs 1600] [--verdicts 800] [--api-verdicts 300]

Runs against a scratch PostgreSQL database (siamweb_bench_<pid>, dropped at exit; the server is
BENCH_POSTGRES_URL, default the local postgres superuser) with Celery's in-memory broker, so
nothing the services send needs Redis. Prints a table and writes
bench/results/verdict_speed.json.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _pg

_pg.scratch_database(broker="memory://")

from django.test import Client  # noqa: E402
from django.urls import Resolver404, resolve, reverse  # noqa: E402
from django.utils import timezone  # noqa: E402
from rest_framework.authtoken.models import Token  # noqa: E402

from annotations.models import Group, Judgement, ReviewItem  # noqa: E402
from annotations.selectors.queue import QueueFilters, review_queue  # noqa: E402
from annotations.services.accounts import user_ensure  # noqa: E402
from annotations.services.review.inputs import inputs_submit  # noqa: E402
from annotations.services.review.verdicts import judgement_create  # noqa: E402

API_PATH = "/api/v1/judgements"


def held_card(user) -> ReviewItem | None:
    """The card the curator's page shows now: the item leased to them."""
    return (
        ReviewItem.objects.filter(leased_by=user, lease_expires_at__gt=timezone.now())
        .select_related("prediction")
        .first()
    )


def rejected_ids(item: ReviewItem) -> set[int]:
    return set(
        Judgement.objects.live()
        .filter(review_item=item, rejected_group__isnull=False)
        .values_list("rejected_group_id", flat=True)
    )


def choose_verdict(item: ReviewItem, rng: random.Random) -> tuple[str, dict | None]:
    """(verdict, ranked group or None) the way a curator's verdicts are spread, given the
    card's state."""
    ranked = item.prediction.ranked_groups
    rejected = rejected_ids(item)
    others = [g for g in ranked[1:] if g["group_id"] not in rejected]
    if item.status == ReviewItem.Status.AWAITING_GROUP:
        # After a false match the curator names the right group, or says it has none.
        if others and rng.random() < 0.75:
            return "reassign", others[0]
        return "none", None
    roll = rng.random()
    top = ranked[0] if ranked else None
    if roll < 0.55 and top:
        return "confirm", top
    if roll < 0.75 and top:
        return "false_match", top
    if roll < 0.90 and others:
        return "reassign", others[0]
    return "none", None


def judge_on_page(
    client: Client, user, rng: random.Random, recorder: _pg.QueryRecorder | None = None
) -> tuple[str, _pg.Timing] | None:
    item = held_card(user)
    if item is None:
        return None
    verdict, group = choose_verdict(item, rng)
    url = reverse("review-item-judge", args=[item.id])
    code = group["code"] if group else ""
    data = {
        "verdict": verdict,
        "group_code": code,
        "prediction_id": item.prediction_id,
        # The page sends a fresh key per card shown, so a double click replays the verdict.
        "idempotency_key": uuid.uuid4().hex,
    }
    recording = recorder.recording() if recorder else contextlib.nullcontext()
    with recording:
        response, timing = _pg.timed(lambda: client.post(url, data, HTTP_HX_REQUEST="true"))
    assert response.status_code == 200, (response.status_code, response.content[:500])
    return verdict, timing


def api_exists() -> bool:
    try:
        resolve(API_PATH)
    except Resolver404:
        return False
    return True


def next_unleased(user) -> ReviewItem | None:
    """The next pending item nobody holds that ``user`` has not judged yet (5% of items want
    two curators)."""
    queue = review_queue(filters=QueueFilters(), user=user, status=ReviewItem.Status.PENDING)
    return queue.filter(leased_by=None).select_related("prediction").first()


def judge_by_service(user, rng: random.Random) -> tuple[str, _pg.Timing] | None:
    """The verdict alone: judgement_create, no HTTP, no next card."""
    item = next_unleased(user)
    if item is None:
        return None
    verdict, group = choose_verdict(item, rng)
    chosen = Group.objects.get(id=group["group_id"]) if group else None
    _, timing = _pg.timed(
        lambda: judgement_create(
            review_item=item,
            user=user,
            verdict=verdict,
            group=chosen,
            prediction_id=item.prediction_id,
            idempotency_key=uuid.uuid4().hex,
        )
    )
    return verdict, timing


def judge_by_api(
    client: Client, user, rng: random.Random, recorder: _pg.QueryRecorder | None = None
) -> tuple[str, _pg.Timing] | None:
    item = next_unleased(user)
    if item is None:
        return None
    verdict, group = choose_verdict(item, rng)
    body = {
        "review_item": item.id,
        "verdict": verdict,
        "group": group["group_id"] if group else None,
        "prediction": item.prediction_id,
    }
    recording = recorder.recording() if recorder else contextlib.nullcontext()
    with recording:
        response, timing = _pg.timed(
            lambda: client.post(
                API_PATH,
                body,
                content_type="application/json",
                HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()),
            )
        )
    assert response.status_code in (200, 201), (response.status_code, response.content[:500])
    return verdict, timing


def rows_by_verdict(name: str, timings: list[tuple[str, _pg.Timing]]) -> list[dict]:
    rows = [{"endpoint": name, "verdict": "all", **_pg.summary([timing for _, timing in timings])}]
    for verdict in ("confirm", "false_match", "reassign", "none"):
        mine = [timing for v, timing in timings if v == verdict]
        if mine:
            rows.append({"endpoint": name, "verdict": verdict, **_pg.summary(mine)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--inputs", type=int, default=1600)
    parser.add_argument("--verdicts", type=int, default=800)
    parser.add_argument("--api-verdicts", type=int, default=300)
    parser.add_argument("--breakdown", type=int, default=200)
    args = parser.parse_args()
    load_before = _pg.load_average()

    taxonomy = _pg.onet_live()
    texts = _pg.realistic_inputs(args.inputs)
    for start in range(0, len(texts), 200):
        inputs_submit(taxonomy=taxonomy, texts=texts[start : start + 200], source="api")
    _pg.vacuum_analyze()
    pending = ReviewItem.objects.filter(status=ReviewItem.Status.PENDING).count()
    print(f"{pending:,} review items pending")

    curator, _ = user_ensure(username="bench-curator", password="bench-pass-123", admin=False)
    client = Client(HTTP_HOST="localhost")
    client.force_login(curator)
    rng = random.Random(5)
    assert client.get(reverse("review")).status_code == 200  # claims the first card
    for _ in range(20):  # warm: templates, connections
        judge_on_page(client, curator, rng)
    recorder = _pg.QueryRecorder()
    for _ in range(20):
        judge_on_page(client, curator, rng, recorder)
    queries_per_verdict = len(recorder.statements) / 20

    page: list[tuple[str, _pg.Timing]] = []
    while len(page) < args.verdicts:
        result = judge_on_page(client, curator, rng)
        if result is None:
            print("the queue ran dry")
            break
        page.append(result)
    rows = rows_by_verdict("POST /review/items/<id>/judge (htmx)", page)
    for row in rows:
        row["queries"] = round(queries_per_verdict, 1) if row["verdict"] == "all" else None

    # Where the page's time goes: the next card alone (the panel a verdict answers with), and
    # the verdict alone (the service, without HTTP or the next card).
    panel = []
    for _ in range(args.breakdown):
        ReviewItem.objects.filter(leased_by=curator).update(leased_by=None, lease_expires_at=None)
        response, timing = _pg.timed(lambda: client.get(reverse("review"), HTTP_HX_REQUEST="true"))
        assert response.status_code == 200, response.status_code
        panel.append(timing)
    rows.append(
        {"endpoint": "GET /review/ (htmx): the next card alone", "verdict": "-"}
        | _pg.summary(panel)
    )
    service = []
    while len(service) < args.breakdown:
        result = judge_by_service(curator, rng)
        if result is None:
            print("the queue ran dry")
            break
        service.append(result)
    rows.append(
        {"endpoint": "judgement_create(): the verdict alone", "verdict": "all"}
        | _pg.summary([timing for _, timing in service])
    )

    api_note = None
    if api_exists():
        token = Token.objects.create(user=curator)
        api = Client(HTTP_HOST="localhost", HTTP_AUTHORIZATION=f"Token {token.key}")
        for _ in range(10):
            judge_by_api(api, curator, rng)
        recorder = _pg.QueryRecorder()
        for _ in range(20):
            judge_by_api(api, curator, rng, recorder)
        timings = []
        while len(timings) < args.api_verdicts:
            result = judge_by_api(api, curator, rng)
            if result is None:
                print("the queue ran dry")
                break
            timings.append(result)
        api_rows = rows_by_verdict(f"POST {API_PATH}", timings)
        api_rows[0]["queries"] = round(len(recorder.statements) / 20, 1)
        rows += api_rows
    else:
        api_note = f"{API_PATH} does not exist yet: not measured"
        print(api_note)

    load_after = _pg.load_average()
    machine = _pg.machine()
    print(f"machine: {machine}")
    print(f"load average before / after: {load_before} / {load_after}")
    _pg.print_table(
        rows,
        [
            "endpoint",
            "verdict",
            "n",
            "p50_ms",
            "p99_ms",
            "max_ms",
            "cpu_p50_ms",
            "cpu_p99_ms",
            "queries",
        ],
    )
    target = 50.0
    met = all(
        row["p99_ms"] <= target
        for row in rows
        if row["verdict"] == "all" and row["endpoint"].startswith("POST")
    )
    print(f"target: p99 ≤ {target:.0f} ms server time: {'met' if met else 'NOT met'}")
    _pg.write_results(
        "verdict_speed",
        {
            "machine": machine,
            "load_average_before": load_before,
            "load_average_after": load_after,
            "broker": "memory://",
            "inputs": len(texts),
            "pending_at_start": pending,
            "target_p99_ms": target,
            "target_met": met,
            "api_note": api_note,
            "rows": rows,
        },
    )


if __name__ == "__main__":
    main()
