"""A refusal is logged as one line: a curator opening an admin page is the product working."""

from __future__ import annotations

import logging


def test_a_403_is_logged_without_a_traceback(client, curator, caplog):
    client.force_login(curator)
    with caplog.at_level(logging.WARNING, logger="django.request"):
        response = client.get("/audit/")
    assert response.status_code == 403
    (record,) = [r for r in caplog.records if r.name == "django.request"]
    assert record.getMessage() == "Forbidden (Permission denied): /audit/"
    assert record.exc_info is None and "Traceback" not in caplog.text


def test_a_server_error_keeps_its_traceback(client, curator, caplog, monkeypatch):
    """Only refusals lose theirs: a 500 is news and needs its traceback."""
    from annotations.views import inputs as views_inputs

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(views_inputs, "render", broken)
    client.raise_request_exception = False
    client.force_login(curator)
    with caplog.at_level(logging.ERROR, logger="django.request"):
        response = client.get("/inputs/")
    assert response.status_code == 500
    (record,) = [r for r in caplog.records if r.name == "django.request"]
    assert record.exc_info is not None
