"""A database that is briefly unavailable answers 503 with Retry-After, never a bare 500.

SQLite's "database is locked" under concurrent writers, or a PostgreSQL connection dropped by a
restart, says nothing about the request: the same request a moment later succeeds. A 503 tells a
client (the review page, an API script) to retry it, with its idempotency key, and that nothing
was stored: the transaction that failed was rolled back.
"""

from __future__ import annotations

import hmac
import logging

from django.conf import settings
from django.db import DataError, InterfaceError, OperationalError
from django.http import HttpResponse, JsonResponse
from django.shortcuts import render
from django.template.defaultfilters import filesizeformat
from django.utils.cache import patch_cache_control

from annotations.services.taxonomy_upload import MAX_IMPORT_BYTES

logger = logging.getLogger(__name__)

TRANSIENT_DATABASE_ERRORS = (OperationalError, InterfaceError)
RETRY_AFTER_SECONDS = 2


def transient_error_response(request, exc: Exception) -> HttpResponse | None:
    """A 503 for a transient database error, JSON for the API; None for any other error."""
    if not isinstance(exc, TRANSIENT_DATABASE_ERRORS):
        return None
    logger.warning("database unavailable for %s %s: %s", request.method, request.path, exc)
    detail = "The database is busy or unavailable; nothing was stored. Try again in a moment."
    if request.path.startswith("/api/"):
        response: HttpResponse = JsonResponse({"detail": detail}, status=503)
    else:
        response = HttpResponse(detail, status=503, content_type="text/plain; charset=utf-8")
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


class ContentSecurityPolicyMiddleware:
    """Every answer carries ``settings.SIAMWEB_CONTENT_SECURITY_POLICY``: the browser runs and
    styles only this site's own files, so markup slipped into a page cannot run as script. A view
    that needs a looser policy (a third party's page) sets the header itself, and keeps it."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = settings.SIAMWEB_CONTENT_SECURITY_POLICY
        return response


# What a proxy tells the application about a request; believed only from the proxy itself.
FORWARDED_HEADERS = (
    "HTTP_X_FORWARDED_FOR",
    "HTTP_X_FORWARDED_PROTO",
    "HTTP_X_FORWARDED_HOST",
    "HTTP_X_FORWARDED_PORT",
    "HTTP_X_REAL_IP",
)
PROXY_SECRET_HEADER = "HTTP_X_SIAMWEB_PROXY_SECRET"


class ForwardedHeadersMiddleware:
    """The client's address and scheme that a proxy forwards (X-Forwarded-For, -Proto) are kept
    only on a request that carries ``SIAMWEB_PROXY_SECRET`` (nginx adds it, docs/deploying.md);
    on any other they are removed before anything reads them. gunicorn listens on loopback,
    where any local process can reach it, and the proxy's address alone proves nothing there:
    a request sent straight to gunicorn with a forged X-Forwarded-For is counted at its own
    address by the sign-in lockout and the throttles, and a forged X-Forwarded-Proto gets no
    HTTPS. The secret itself never goes further than this."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        sent = request.META.pop(PROXY_SECRET_HEADER, "")
        secret = settings.SIAMWEB_PROXY_SECRET
        if not (secret and hmac.compare_digest(sent.encode(), secret.encode())):
            for name in FORWARDED_HEADERS:
                request.META.pop(name, None)
        return self.get_response(request)


class TransientDatabaseErrorMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exc: Exception) -> HttpResponse | None:
        if isinstance(exc, DataError) and "NUL" in str(exc):
            # PostgreSQL refuses a NUL in any text, even in a lookup, and says so before it
            # runs the statement: a value no check before it caught, answered as bad input.
            return nul_refused(request)
        return transient_error_response(request, exc)


NUL_DETAIL = "the request holds a NUL character (%00), which no text may contain"


def nul_refused(request) -> HttpResponse:
    logger.warning("refused %s %s: a NUL character", request.method, request.path)
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": NUL_DETAIL}, status=400)
    return HttpResponse(NUL_DETAIL, status=400, content_type="text/plain; charset=utf-8")


class NulCharacterMiddleware:
    """Refuse a NUL character in the address with a 400: a view looks its segments up (a
    group's code), which PostgreSQL refuses with a 500, and no name holds one. A NUL in a
    parameter or a form is the fields' to refuse, naming them; one only the database catches
    ends in ``TransientDatabaseErrorMiddleware.process_exception``."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        if "\x00" in request.path:
            return nul_refused(request)
        return self.get_response(request)


class MethodNotAllowedPageMiddleware:
    """Django answers a wrong method with an empty 405: a browser shows a blank page. Outside
    the API (whose 405s are JSON already) the site's page says which methods the address takes."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if (
            response.status_code == 405
            and not response.content
            and not request.path.startswith("/api/")
        ):
            allowed = response.get("Allow", "")
            methods = [method.strip() for method in allowed.split(",") if method.strip()]
            page = render(request, "405.html", {"allowed": methods}, status=405)
            page["Allow"] = allowed
            return page
        return response


class PrivateWhenSignedInMiddleware:
    """A page or API answer made for a signed-in user holds their data (their queue, their
    token): marked ``Cache-Control: private`` so no shared cache (a proxy, a CDN) keeps it, unless
    the view said how to cache it itself."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated and not response.has_header("Cache-Control"):
            patch_cache_control(response, private=True)
        return response


# What multipart framing and a form's other fields add to a file's own size.
FORM_SLACK_BYTES = 64 * 1024


def _body_limit(request) -> tuple[int | None, str]:
    """The most bytes a request to this address may declare, and what the limit is called."""
    path = request.path
    if path in ("/bulk/", "/api/v1/bulk-jobs"):
        return settings.SIAMWEB_BULK_MAX_BYTES + FORM_SLACK_BYTES, "SIAMWEB_BULK_MAX_BYTES"
    if path in ("/taxonomies/", "/api/v1/taxonomies"):
        return MAX_IMPORT_BYTES + FORM_SLACK_BYTES, "a taxonomy file's limit"
    if path == "/inputs/upload/":
        return settings.SIAMWEB_UPLOAD_MAX_BYTES + FORM_SLACK_BYTES, "SIAMWEB_UPLOAD_MAX_BYTES"
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE, "DATA_UPLOAD_MAX_MEMORY_SIZE"


class RequestSizeLimitMiddleware:
    """Refuse a body longer than its address takes from its declared Content-Length, before
    anything reads it (the CSRF check reads a whole form, and Django writes an upload to a
    temporary file before a view sees it): a JSON 413 under the API, a page elsewhere."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        try:
            declared = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            declared = 0
        limit, name = _body_limit(request)
        if limit is None or declared <= limit:
            return self.get_response(request)
        logger.warning(
            "refused %s %s: %d bytes declared, %d allowed", request.method, request.path,
            declared, limit,
        )  # fmt: skip
        message = (
            f"the request is {filesizeformat(declared)}; this address takes up to "
            f"{filesizeformat(limit)} ({name})"
        )
        if request.path.startswith("/api/"):
            return JsonResponse({"detail": message}, status=413)
        return render(request, "413.html", {"message": message}, status=413)
