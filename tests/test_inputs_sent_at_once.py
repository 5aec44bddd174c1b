"""The same new text sent by several clients at the same moment is one input: every caller gets
it (201, the same item), none a 500, under PostgreSQL and SQLite. Real requests, in parallel,
to the threaded live server."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

import pytest
from rest_framework.authtoken.models import Token

from annotations.models import Input, ReviewItem

CLIENTS = 4
ROUNDS = 5


def send(url: str, token: str, text: str) -> tuple[int, dict]:
    request = urllib.request.Request(
        url,
        data=json.dumps({"texts": [text]}).encode(),
        headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, {"body": exc.read().decode(errors="replace")[:500]}


def send_at_once(url: str, token: str, text: str) -> list[tuple[int, dict]]:
    """``CLIENTS`` threads post ``text`` together, released by one barrier."""
    start = threading.Barrier(CLIENTS)
    answers: list[tuple[int, dict]] = []
    lock = threading.Lock()

    def client() -> None:
        start.wait()
        answer = send(url, token, text)
        with lock:
            answers.append(answer)

    threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


@pytest.mark.django_db(transaction=True)
def test_one_new_text_sent_by_four_clients_at_once_is_one_input_for_all(
    live_server, tiny_taxonomy, curator
):
    token = Token.objects.get_or_create(user=curator)[0].key
    url = f"{live_server.url}/api/v1/taxonomies/{tiny_taxonomy.slug}/inputs"
    for round_number in range(ROUNDS):
        text = f"night shift icu nurse {round_number}"
        answers = send_at_once(url, token, text)
        assert [status for status, _ in answers] == [201] * CLIENTS, answers
        stored = Input.objects.get(taxonomy=tiny_taxonomy, text=text)
        assert stored.occurrences == CLIENTS  # each send counted once
        item = ReviewItem.objects.get(input=stored)
        # Every caller got that one input's one item.
        results = {
            (body["results"][0]["id"], body["results"][0]["input"]["id"]) for _, body in answers
        }
        assert results == {(item.id, stored.id)}
