"""What nginx in front of gunicorn does for the product, with the config the docs give: TLS and
HSTS, bodies refused before Django reads them, slow clients kept off gunicorn, static files."""

from __future__ import annotations

import http.client
import json
import re
import socket
import ssl
import threading
from pathlib import Path

import pytest
from rest_framework.authtoken.models import Token

from bench._nginx import SITE_CONFIG, start_nginx, stop_nginx
from bench._servers import free_port
from tests.proxy.conftest import HOST, client_tls

# The deployment serves Django's test database: its tests ask for it, so it is created.
pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]


def send_head(connection, method: str, path: str, headers: dict[str, str]):
    """A request's head alone: the body it declares is never sent."""
    connection.putrequest(method, path, skip_host=True)
    for name, value in {"Host": HOST, **headers}.items():
        connection.putheader(name, value)
    connection.endheaders()
    return connection.getresponse()


def test_the_site_config_in_the_docs_is_the_one_tested():
    docs = (ROOT / "docs" / "deploying.md").read_text()
    blocks = re.findall(r"```nginx\n(.*?)```", docs, flags=re.S)
    assert SITE_CONFIG.read_text() in blocks


@pytest.mark.parametrize("host", [HOST, "evil.example"])
def test_plain_http_is_redirected_to_the_sites_own_name_and_the_health_check_answered(
    deployment, host
):
    """To the server_name the config gives, never to the Host the client sent."""
    before = deployment.access_log_size()
    connection = deployment.http()
    response = send_head(connection, "GET", "/review/?page=2", {"Host": host})
    assert response.status == 301
    assert response.getheader("Location") == "https://siamweb.example.org/review/?page=2"
    assert not deployment.reached_gunicorn(before, "GET", "/review/")

    connection = deployment.http()
    response = send_head(connection, "GET", "/healthz", {})
    assert response.status == 200, response.read()


def test_https_answers_carry_hsts_and_secure_cookies_whatever_the_client_claims(deployment):
    before = deployment.access_log_size()
    connection = deployment.https()
    # A client's own X-Forwarded-Proto is replaced by nginx's: no redirect loop, no spoofing.
    response = send_head(connection, "GET", "/accounts/login/", {"X-Forwarded-Proto": "http"})
    body = response.read()
    assert response.status == 200, body[:500]
    assert response.getheader("Strict-Transport-Security") == "max-age=31536000"
    cookie = response.getheader("Set-Cookie")
    assert "csrftoken=" in cookie and "Secure" in cookie
    assert response.getheader("Server") == "nginx"  # no version given away
    assert deployment.reached_gunicorn(before, "GET", "/accounts/login/")


def test_gunicorn_alone_redirects_plain_http_so_it_is_not_served_unencrypted(deployment):
    connection = deployment.http(deployment.gunicorn_port)
    response = send_head(connection, "GET", "/accounts/login/", {})
    assert response.status == 301
    assert response.getheader("Location") == f"https://{HOST}/accounts/login/"


@pytest.mark.parametrize(
    ("path", "content_type"),
    [
        ("/accounts/login/", "text/html"),
        ("/bulk/", "text/html"),
        ("/api/v1/bulk-jobs", "application/json"),
        ("/api/v1/taxonomies/onet/normalize", "application/json"),
    ],
)
def test_a_body_over_the_limit_is_refused_by_nginx_before_it_reaches_django(
    deployment, path, content_type
):
    before = deployment.access_log_size()
    connection = deployment.https()
    response = send_head(
        connection, "POST", path,
        {"Content-Length": str(2 * 1024**3), "Content-Type": "multipart/form-data; boundary=x"},
    )  # fmt: skip
    body = response.read()

    assert response.status == 413
    assert response.getheader("Content-Type").startswith(content_type)
    if content_type == "application/json":
        assert "larger than this address takes" in json.loads(body)["detail"]
    else:
        assert b"larger than this address takes" in body
    assert not deployment.reached_gunicorn(before, "POST", path)


def test_each_address_keeps_its_own_limit(deployment, curator):
    # 3 MB is over what a login form takes but well within a bulk file's limit: nginx passes
    # it on (whole, once received) from a signed-in caller and Django answers (not a form).
    body = b"x" * (3 * 1024 * 1024)
    before = deployment.access_log_size()
    refused = deployment.https()
    response = send_head(refused, "POST", "/accounts/login/", {"Content-Length": str(len(body))})
    assert response.status == 413

    token = Token.objects.create(user=curator)
    passed = deployment.https()
    passed.putrequest("POST", "/api/v1/bulk-jobs", skip_host=True)
    for name, value in {"Host": HOST, "Content-Length": str(len(body)),
                        "Authorization": f"Token {token.key}",
                        "Content-Type": "application/octet-stream"}.items():  # fmt: skip
        passed.putheader(name, value)
    passed.endheaders(body)
    response = passed.getresponse()
    response.read()
    assert response.status == 415  # Django's answer: a file goes in a multipart form
    assert not deployment.reached_gunicorn(before, "POST", "/accounts/login/")
    assert deployment.reached_gunicorn(before, "POST", "/api/v1/bulk-jobs")


class SlowClient(threading.Thread):
    """Sends ``prefix`` at once, then the rest a byte every 0.2 s until told to stop."""

    def __init__(self, port: int, prefix: bytes, rest: bytes) -> None:
        super().__init__(daemon=True)
        self.sock = client_tls().wrap_socket(
            socket.create_connection(("127.0.0.1", port), timeout=30), server_hostname=HOST
        )
        self.prefix, self.rest = prefix, rest
        self.trickling = threading.Event()
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            self.sock.sendall(self.prefix)
            for sent, byte in enumerate(self.rest):
                if sent == 3:
                    self.trickling.set()
                if self.stop.wait(0.2):
                    return
                self.sock.sendall(bytes([byte]))
        except (OSError, ssl.SSLError):
            return

    def answered(self) -> bool:
        self.sock.setblocking(False)
        try:
            return bool(self.sock.recv(1))
        except (BlockingIOError, ssl.SSLWantReadError):
            return False
        finally:
            self.sock.setblocking(True)


def test_slow_clients_do_not_starve_gunicorn(deployment):
    """gunicorn has one worker of one thread here: a client trickling its request straight to
    it holds that thread, and everyone else waits. Through nginx they hold only nginx."""
    port = deployment.proxy.https_port
    head = f"GET /accounts/login/ HTTP/1.1\r\nHost: {HOST}\r\nX-Slow: {'a' * 200}\r\n\r\n"
    upload = (
        f"POST /api/v1/taxonomies/onet/normalize HTTP/1.1\r\nHost: {HOST}\r\n"
        "Content-Type: application/json\r\nContent-Length: 500\r\n\r\n"
    )
    slow = [SlowClient(port, b"", head.encode()) for _ in range(4)]
    slow += [SlowClient(port, upload.encode(), b" " * 500) for _ in range(4)]
    for client in slow:
        client.start()
    try:
        for client in slow:
            assert client.trickling.wait(30), "a slow client could not send"
        for _ in range(5):
            connection = deployment.https()
            response = send_head(connection, "GET", "/healthz", {})
            assert response.status == 200, response.read()
            response.read()
        # Every slow client was still sending, unanswered, while the others were served.
        assert [client.is_alive() and not client.answered() for client in slow] == [True] * 8
    finally:
        for client in slow:
            client.stop.set()
            client.sock.close()


def test_static_files_are_served_by_nginx_with_a_lifetime(deployment):
    before = deployment.access_log_size()
    connection = deployment.https()
    response = send_head(connection, "GET", "/static/css/siamweb.css", {})
    body = response.read()
    assert response.status == 200
    assert response.getheader("Content-Type") == "text/css"
    assert response.getheader("Cache-Control") == "max-age=86400"
    assert body == (ROOT / "static" / "css" / "siamweb.css").read_bytes()
    assert not deployment.reached_gunicorn(before, "GET", "/static/css/siamweb.css")


def test_gunicorn_down_is_a_503_to_retry_not_a_502(tmp_path):
    nothing_listens = free_port()
    proxy = start_nginx(tmp_path / "nginx", upstream_port=nothing_listens, static_root=tmp_path)
    try:
        for method, path, content_type in (
            ("GET", "/api/v1/taxonomies/onet/normalize", "application/json"),
            ("GET", "/review/", "text/html"),
            # An upload's question to Django before its body (auth_request) fails the same way.
            ("POST", "/api/v1/bulk-jobs", "application/json"),
        ):
            connection = http.client.HTTPSConnection(
                "127.0.0.1", proxy.https_port, timeout=30, context=client_tls()
            )
            head = {"Content-Length": "10"} if method == "POST" else {}
            response = send_head(connection, method, path, head)
            body = response.read()
            assert response.status == 503, body
            assert response.getheader("Retry-After") == "5"
            assert response.getheader("Content-Type").startswith(content_type)
            assert b"restarting" in body
    finally:
        stop_nginx(proxy)


def sign_in(deployment, username: str, password: str, forwarded_for: str) -> int:
    """One sign-in through nginx with the login form's CSRF token, as a browser sends it."""
    connection = deployment.https()
    response = send_head(connection, "GET", "/accounts/login/", {})
    page = response.read().decode()
    cookie = response.getheader("Set-Cookie").split(";", 1)[0]
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    form = f"username={username}&password={password}&csrfmiddlewaretoken={token}"
    connection.request(
        "POST", "/accounts/login/", body=form,
        headers={
            "Host": HOST, "Cookie": cookie, "Referer": f"https://{HOST}/accounts/login/",
            "Content-Type": "application/x-www-form-urlencoded",
            "X-Forwarded-For": forwarded_for,
        },
    )  # fmt: skip
    response = connection.getresponse()
    response.read()
    return response.status


def test_a_client_cannot_dodge_the_sign_in_lockout_with_its_own_forwarded_for(deployment):
    # nginx replaces the client's X-Forwarded-For with the address it sees, which Django reads
    # (SIAMWEB_PROXY_COUNT=1): wrong passwords from "six addresses" are one address's six, and
    # the fifth (SIAMWEB_LOGIN_FAILURE_LIMIT) locks the username at it.
    statuses = [
        sign_in(deployment, "ada", "wrong-password", forwarded_for=f"203.0.113.{n}")
        for n in range(1, 7)
    ]
    assert statuses == [200] * 4 + [429] * 2
