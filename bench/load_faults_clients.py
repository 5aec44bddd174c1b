"""The clients of bench/load_faults.py: normalize traffic, and curators judging through the REST API
and through the htmx review page, each recording what it saw."""

from __future__ import annotations

import collections
import http.client
import http.cookiejar
import json
import random
import re
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

NORMALIZE_PATH = "/api/v1/taxonomies/onet/normalize"
PASSWORD = "bench-pass-123"
# What a real client does with a verdict that got no answer or a 503: the same request again.
VERDICT_ATTEMPTS = 8
# A curator's pause between verdicts: a fast one reads a card in a second (--think-seconds).
THINK_SECONDS = 1.0


class Server:
    """Where the clients send their requests: gunicorn's port (it survives a restart of
    gunicorn), or nginx's HTTPS port in front of it (``proxy_port``)."""

    def __init__(self, web_port: int, proxy_port: int | None = None) -> None:
        self.web_port = web_port
        self.port = proxy_port or web_port
        self.scheme = "https" if proxy_port else "http"
        # nginx's certificate is self-signed for the benchmark: encrypted, not verified.
        self.tls = ssl._create_unverified_context() if proxy_port else None

    def connection(self) -> http.client.HTTPConnection:
        if self.tls:
            return http.client.HTTPSConnection("127.0.0.1", self.port, timeout=60, context=self.tls)
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)


def json_request(connection, method: str, path: str, token: str, body=None, headers=None):
    all_headers = {"Host": "localhost", "Authorization": f"Token {token}", **(headers or {})}
    payload = None
    if body is not None:
        payload = json.dumps(body)
        all_headers["Content-Type"] = "application/json"
    connection.request(method, path, body=payload, headers=all_headers)
    response = connection.getresponse()
    data = response.read()
    return response.status, data


class Recorder:
    """What the clients saw, merged under a lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.latencies: list[float] = []
        self.statuses: collections.Counter[str] = collections.Counter()
        self.verdicts: dict[str, str] = {}  # idempotency key → final outcome
        self.verdict_statuses: collections.Counter[str] = collections.Counter()
        self.verdict_retries = 0

    def normalize(self, status: str, latency_ms: float | None) -> None:
        with self.lock:
            self.statuses[status] += 1
            if latency_ms is not None:
                self.latencies.append(latency_ms)

    def verdict(self, key: str, outcome: str, statuses: list[str]) -> None:
        with self.lock:
            self.verdicts[key] = outcome
            self.verdict_statuses.update(statuses)
            self.verdict_retries += len(statuses) - 1


def normalize_client(server: Server, token: str, texts, stop: threading.Event, rec: Recorder):
    rng = random.Random()
    connection = server.connection()
    while not stop.is_set():
        began = time.perf_counter()
        try:
            status, _ = json_request(
                connection, "POST", NORMALIZE_PATH, token, {"texts": [rng.choice(texts)]}
            )
        except (OSError, http.client.HTTPException):
            rec.normalize("no answer", None)
            connection.close()
            connection = server.connection()
            time.sleep(0.2)
            continue
        latency = (time.perf_counter() - began) * 1000
        rec.normalize(str(status), latency if status == 200 else None)
        if status == 503:  # "try again" (nginx while gunicorn restarts): as after no answer
            time.sleep(0.2)
    connection.close()


def _send_verdict(server: Server, send) -> tuple[str, list[str]]:
    """Send until an answer other than "no answer" or 503; the final outcome and every status."""
    statuses: list[str] = []
    for attempt in range(VERDICT_ATTEMPTS):
        try:
            status = str(send())
        except (OSError, http.client.HTTPException):
            status = "no answer"
        statuses.append(status)
        if status not in ("no answer", "503"):
            return status, statuses
        time.sleep(min(0.5 * 2**attempt, 5))
    return statuses[-1], statuses


def api_curator(server: Server, token: str, stop: threading.Event, rec: Recorder) -> None:
    rng = random.Random()
    connection = server.connection()

    def reconnect():
        nonlocal connection
        connection.close()
        connection = server.connection()

    while not stop.is_set():
        try:
            status, data = json_request(
                connection, "POST", "/api/v1/review-items/claim", token, {"taxonomy": "onet"}
            )
        except (OSError, http.client.HTTPException):
            reconnect()
            time.sleep(0.5)
            continue
        if status != 200:
            time.sleep(0.5)
            continue
        item = json.loads(data)
        key = uuid.uuid4().hex
        verdict = "confirm" if rng.random() < 0.85 else "skip"
        body = {"review_item": item["id"], "verdict": verdict}

        def send(body=body, key=key):
            try:
                status, _ = json_request(
                    connection, "POST", "/api/v1/judgements", token, body, {"Idempotency-Key": key}
                )
            except (OSError, http.client.HTTPException):
                reconnect()
                raise
            return status

        outcome, statuses = _send_verdict(server, send)
        rec.verdict(f"api:{key}", outcome, statuses)
        stop.wait(THINK_SECONDS)
    connection.close()


CARD_FORM = re.compile(
    r'action="(/review/items/(\d+)/judge)[^"]*"[^>]*>.*?name="prediction_id" value="(\d+)".*?'
    r'name="idempotency_key" value="([^"]+)"',
    re.S,
)


def page_curator(server: Server, stop: threading.Event, rec: Recorder) -> None:
    """A curator on the htmx review page: log in, then confirm card after card."""
    base = f"{server.scheme}://127.0.0.1:{server.port}"
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(jar), urllib.request.HTTPSHandler(context=server.tls)
    )

    def csrf() -> str:
        return next((c.value for c in jar if c.name == "csrftoken"), "")

    def call(path: str, data: dict | None = None) -> tuple[int, str]:
        body = urllib.parse.urlencode(data).encode() if data is not None else None
        request = urllib.request.Request(base + path, data=body)
        request.add_header("HX-Request", "true")
        if data is not None:
            request.add_header("X-CSRFToken", csrf())
        try:
            with opener.open(request, timeout=60) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(errors="replace")

    logged_in = False
    page = ""
    while not stop.is_set():
        try:
            if not logged_in:
                call("/accounts/login/")
                status, _ = call(
                    "/accounts/login/",
                    {"username": "bench-page", "password": PASSWORD, "csrfmiddlewaretoken": csrf()},
                )
                # A failed login answers 200 with the form again: the session cookie tells.
                logged_in = status == 200 and any(c.name == "sessionid" for c in jar)
                page = ""
            if not page:
                status, page = call("/review/")
            card = CARD_FORM.search(page)
        except OSError:
            logged_in = False
            time.sleep(0.5)
            continue
        if card is None:
            page = ""
            time.sleep(0.5)
            continue
        judge_url, _item_id, prediction_id, key = card.groups()
        form = {
            "verdict": "confirm",
            "prediction_id": prediction_id,
            "idempotency_key": key,
            "csrfmiddlewaretoken": csrf(),
        }
        answer: dict[str, str] = {}

        def send(form=form, judge_url=judge_url, answer=answer):
            status, answer["page"] = call(judge_url, form)
            return status

        outcome, statuses = _send_verdict(server, send)
        rec.verdict(f"page:{key}", outcome, statuses)
        stop.wait(THINK_SECONDS)
        page = answer.get("page", "") if outcome == "200" else ""
