"""What reaches the server from the edge, through the deployed nginx config: an anonymous upload
is refused before nginx reads its body, forwarded headers are believed only from nginx, plain
HTTP is redirected to the site's own name, and nginx's own refusals come in the product's form
(JSON under /api/, a short page elsewhere) with the headers Django's answers carry."""

from __future__ import annotations

import http.client
import json
import socket

import pytest
from django.conf import settings
from rest_framework.authtoken.models import Token

from tests.proxy.conftest import HOST, client_tls
from tests.proxy.test_nginx_in_front import send_head

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

FIFTY_MIB = 50 * 1024 * 1024
HEADERS_OF_EVERY_ANSWER = {
    "Content-Security-Policy": settings.SIAMWEB_CONTENT_SECURITY_POLICY,
    "Strict-Transport-Security": "max-age=31536000",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
}


def body_files(deployment) -> list:
    """What nginx holds of request bodies on disk (client_body_temp_path)."""
    return [path for path in (deployment.proxy.folder / "client_body").rglob("*") if path.is_file()]


def raw_https(deployment, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """``request`` sent as is over TLS (for what http.client refuses to send); the answer."""
    sock = client_tls().wrap_socket(
        socket.create_connection(("127.0.0.1", deployment.proxy.https_port), timeout=120),
        server_hostname=HOST,
    )
    with sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines)
    return int(status_line.split()[1]), headers, body


# --- 1. an anonymous upload costs no disk ------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "size", "content_type"),
    [
        ("/api/v1/bulk-jobs", FIFTY_MIB, "application/json"),
        ("/bulk/", FIFTY_MIB, "text/html"),
        ("/api/v1/taxonomies", FIFTY_MIB, "application/json"),
        ("/taxonomies/", FIFTY_MIB, "text/html"),
        ("/inputs/upload/", 2 * 1024 * 1024, "text/html"),
    ],
)
def test_an_anonymous_upload_is_refused_before_nginx_reads_its_body(
    deployment, path, size, content_type
):
    """A 50 MiB anonymous POST was read whole into nginx's temporary folder, then refused by
    Django. Its head alone is sent here: the answer comes without a byte of the body (the
    config before this waited for it, and answered 408 when nginx's own client_body_timeout
    ran out)."""
    before = deployment.access_log_size()
    connection = deployment.https()
    response = send_head(
        connection, "POST", path,
        {"Content-Length": str(size), "Content-Type": "multipart/form-data; boundary=x"},
    )  # fmt: skip
    body = response.read()
    assert response.status == 401, body[:300]
    assert response.getheader("Content-Type").startswith(content_type)
    assert b"sign in first" in body
    assert body_files(deployment) == []
    assert not deployment.reached_gunicorn(before, "POST", path)


@pytest.mark.parametrize(
    ("path", "content_type"),
    [("/api/v1/taxonomies", "application/json"), ("/taxonomies/", "text/html")],
)
def test_a_curators_taxonomy_upload_is_refused_before_nginx_reads_its_body(
    deployment, curator, path, content_type
):
    """Only admins import taxonomies: a curator's 50 MiB upload was buffered whole by nginx
    before Django's 403."""
    token = Token.objects.create(user=curator)
    before = deployment.access_log_size()
    response = send_head(
        deployment.https(), "POST", path,
        {"Content-Length": str(FIFTY_MIB), "Content-Type": "multipart/form-data; boundary=x",
         "Authorization": f"Token {token.key}"},
    )  # fmt: skip
    body = response.read()
    assert response.status == 403, body[:300]
    assert response.getheader("Content-Type").startswith(content_type)
    assert body_files(deployment) == []
    assert not deployment.reached_gunicorn(before, "POST", path)


def test_an_admins_taxonomy_upload_goes_through(deployment, admin_user):
    token = Token.objects.create(user=admin_user)
    before = deployment.access_log_size()
    connection = deployment.https()
    connection.request(
        "POST", "/api/v1/taxonomies", body=b"{}",
        headers={"Host": HOST, "Authorization": f"Token {token.key}",
                 "Content-Type": "application/json"},
    )  # fmt: skip
    response = connection.getresponse()
    response.read()
    assert response.status not in (401, 403, 500, 502, 503)  # Django's own answer to the form
    assert deployment.reached_gunicorn(before, "POST", "/api/v1/taxonomies")


def test_an_invalid_token_is_refused_before_the_body_too(deployment):
    connection = deployment.https()
    response = send_head(
        connection, "POST", "/api/v1/bulk-jobs",
        {"Content-Length": str(FIFTY_MIB), "Authorization": "Token " + "0" * 40},
    )  # fmt: skip
    body = response.read()
    assert response.status == 401
    assert response.getheader("WWW-Authenticate") == "Token"
    assert "sign in first" in json.loads(body)["detail"]


def test_a_signed_in_upload_goes_through(deployment, curator):
    token = Token.objects.create(user=curator)
    before = deployment.access_log_size()
    connection = deployment.https()
    connection.request(
        "POST", "/api/v1/bulk-jobs", body=b"{}",
        headers={"Host": HOST, "Authorization": f"Token {token.key}",
                 "Content-Type": "application/json"},
    )  # fmt: skip
    response = connection.getresponse()
    body = json.loads(response.read())
    assert response.status == 415, body  # Django's own answer: a file comes as a form
    assert deployment.reached_gunicorn(before, "POST", "/api/v1/bulk-jobs")


# --- 4. forwarded headers from nginx only; the redirect to the configured name ----------------


def test_forged_forwarded_headers_sent_straight_to_gunicorn_are_not_believed(deployment):
    """A locked admin once signed in straight to gunicorn with a forged X-Forwarded-For (and
    X-Forwarded-Proto: https). Without nginx's secret neither header counts: the request is
    plain HTTP from its own address, redirected to HTTPS unserved."""
    connection = deployment.http(deployment.gunicorn_port)
    response = send_head(
        connection, "POST", "/accounts/login/",
        {"X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.7", "Content-Length": "0"},
    )  # fmt: skip
    response.read()
    assert response.status == 301
    assert response.getheader("Location") == f"https://{HOST}/accounts/login/"


def test_nginx_is_believed(deployment):
    connection = deployment.https()
    response = send_head(connection, "GET", "/accounts/login/", {})
    response.read()
    assert response.status == 200  # X-Forwarded-Proto: https from nginx, so no redirect


# --- 9. nginx's own answers in the product's form, with the product's headers ------------------


BOTH_FORMS = [("/api/v1/taxonomies", "application/json"), ("/review/", "text/html")]


def assert_product_form(status, headers, body, *, expected_status, content_type) -> None:
    assert status == expected_status, body[:300]
    assert headers["Content-Type"].startswith(content_type)
    for name, value in HEADERS_OF_EVERY_ANSWER.items():
        assert headers.get(name) == value, name
    assert b"nginx" not in body.lower()
    if content_type == "application/json":
        assert json.loads(body)["detail"]
    else:
        assert b"Siamweb" in body


def answer(response: http.client.HTTPResponse) -> tuple[int, dict[str, str], bytes]:
    return response.status, dict(response.getheaders()), response.read()


@pytest.mark.parametrize(("path", "content_type"), BOTH_FORMS)
def test_trace_is_a_405_in_the_products_form(deployment, path, content_type):
    result = answer(send_head(deployment.https(), "TRACE", path, {}))
    assert_product_form(*result, expected_status=405, content_type=content_type)


@pytest.mark.parametrize(("path", "content_type"), BOTH_FORMS)
def test_oversized_headers_are_a_400_in_the_products_form(deployment, path, content_type):
    result = answer(send_head(deployment.https(), "GET", path, {"X-Big": "a" * 20000}))
    assert_product_form(*result, expected_status=400, content_type=content_type)


@pytest.mark.parametrize(("path", "content_type"), BOTH_FORMS)
def test_a_malformed_request_is_a_400_in_the_products_form(deployment, path, content_type):
    request = f"GET {path} HTTP/1.1\r\nHost: {HOST}\r\nHost: other\r\n\r\n".encode()
    result = raw_https(deployment, request)
    assert_product_form(*result, expected_status=400, content_type=content_type)


@pytest.mark.parametrize(("path", "content_type"), BOTH_FORMS)
@pytest.mark.parametrize("prefix", ["", f"https://{HOST}"])
def test_a_path_nginx_cannot_decode_is_a_400_in_the_products_form(
    deployment, path, content_type, prefix
):
    """A %00 in the path is refused by nginx before it knows the path: the request line says
    which form the answer takes."""
    request = f"GET {prefix}{path}/onet%00 HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode()
    result = raw_https(deployment, request)
    assert_product_form(*result, expected_status=400, content_type=content_type)


@pytest.mark.parametrize(("path", "content_type"), BOTH_FORMS)
def test_a_uri_too_long_is_a_414_in_the_products_form(deployment, path, content_type):
    request = f"GET {path}/{'a' * 20000} HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode()
    result = raw_https(deployment, request)
    assert_product_form(*result, expected_status=414, content_type=content_type)


def test_a_body_too_large_is_a_413_with_the_headers(deployment):
    result = answer(
        send_head(
            deployment.https(), "POST", "/api/v1/taxonomies/onet/normalize",
            {"Content-Length": str(2 * 1024**3)},
        )
    )  # fmt: skip
    assert_product_form(*result, expected_status=413, content_type="application/json")


def test_a_missing_static_file_is_a_404_page(deployment):
    result = answer(send_head(deployment.https(), "GET", "/static/css/nothing.css", {}))
    assert_product_form(*result, expected_status=404, content_type="text/html")


def test_static_files_carry_the_security_headers(deployment):
    status, headers, _ = answer(send_head(deployment.https(), "GET", "/static/css/siamweb.css", {}))
    assert status == 200
    for name, value in HEADERS_OF_EVERY_ANSWER.items():
        assert headers.get(name) == value, name


def test_djangos_answers_carry_each_header_once(deployment):
    response = send_head(deployment.https(), "GET", "/accounts/login/", {})
    response.read()
    for name in HEADERS_OF_EVERY_ANSWER:
        assert len(response.headers.get_all(name)) == 1, name
    assert response.getheader("Retry-After") is None


@pytest.mark.parametrize("path", ["/static/css", "/static/admin", "/static/rest_framework"])
def test_a_directory_redirect_never_names_the_host_the_client_sent(deployment, path):
    status, headers, _ = answer(
        send_head(deployment.https(), "GET", path, {"Host": "evil.example"})
    )
    assert status == 301
    assert headers["Location"] == f"{path}/"


@pytest.mark.parametrize(("path", "content_type"), BOTH_FORMS)
@pytest.mark.parametrize("length", [4_095, 6_000, 8_100])
def test_a_long_request_line_nginx_lets_through_is_answered_by_django(
    deployment, path, content_type, length
):
    """gunicorn's default 4,094-byte line refused what nginx passed, with its own HTML 400."""
    long_path = path + "?q=" + "a" * (length - len(path) - len("GET  HTTP/1.1") - 3)
    status, headers, body = answer(send_head(deployment.https(), "GET", long_path, {}))
    assert b"Request Line is too large" not in body
    assert headers["Content-Type"].startswith(content_type), (status, body[:200])
    assert status in (200, 302, 401, 404, 414), (status, body[:200])


@pytest.mark.parametrize(("path", "content_type"), BOTH_FORMS)
def test_many_headers_nginx_lets_through_are_answered_by_django(deployment, path, content_type):
    """gunicorn's default of 100 headers refused what nginx passed, with its own HTML 431."""
    headers = {f"X-Extra-{n}": "1" for n in range(150)}
    status, answered, body = answer(send_head(deployment.https(), "GET", path, headers))
    assert status not in (400, 431), body[:200]
    assert answered["Content-Type"].startswith(content_type)
