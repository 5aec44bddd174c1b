from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError


class Stdin:
    def __init__(self, data: bytes) -> None:
        self.buffer = io.BytesIO(data)


def run(monkeypatch, data: bytes, *args: str) -> str:
    monkeypatch.setattr("sys.stdin", Stdin(data))
    out = io.StringIO()
    call_command("normalize", *args, stdout=out)
    return out.getvalue()


def test_it_prints_one_json_line_per_input_line(monkeypatch, tiny_taxonomy):
    out = run(monkeypatch, b"Long haul truck driver\nespresso barista\n", "jobs", "--k", "2")
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["text"] for line in lines] == ["Long haul truck driver", "espresso barista"]
    assert [line["groups"][0]["code"] for line in lines] == ["53-3032", "35-3023"]
    assert all(len(line["groups"]) == 2 for line in lines)
    assert lines[0]["model_version"] == "jobs/v1"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"nurse\n \ncook\n", "1 bad line"),
        (b"caf\xe9\n", "not UTF-8"),
    ],
)
def test_bad_input_exits_non_zero_and_prints_nothing(monkeypatch, tiny_taxonomy, data, message):
    monkeypatch.setattr("sys.stdin", Stdin(data))
    out = io.StringIO()
    with pytest.raises(CommandError, match=message):
        call_command("normalize", "jobs", stdout=out)
    assert out.getvalue() == ""


def test_an_unknown_taxonomy_or_k_is_refused(monkeypatch, tiny_taxonomy):
    with pytest.raises(CommandError, match="no taxonomy 'nope'"):
        run(monkeypatch, b"nurse\n", "nope")
    with pytest.raises(CommandError, match="--k must be between 1 and 50"):
        run(monkeypatch, b"nurse\n", "jobs", "--k", "0")
