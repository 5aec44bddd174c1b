"""The caller's own API token: when it was made and expires, a new key, none at all. Only ever
the caller's own; throttled per user at ``SIAMWEB_TOKEN_API_RATE`` (DRF's ``token`` scope)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import (
    AuthenticationFailed,
    NotAuthenticated,
    NotFound,
    PermissionDenied,
    Throttled,
)
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle

from annotations.selectors.accounts import ApiToken, api_token_of
from annotations.services.accounts import api_token_revoke, api_token_rotate
from siamweb.web.api import BAD_REQUEST, FORBIDDEN, JsonApi, field_error

NO_TOKEN = OpenApiResponse(description="You have no API token")
TOO_MANY = OpenApiResponse(
    description="Too many calls to the token endpoints (SIAMWEB_TOKEN_API_RATE), or too many "
    "invalid tokens from this address; retry after Retry-After seconds"
)


class TokenApi(JsonApi):
    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "token"


class TokenFactsSerializer(serializers.Serializer):
    created = serializers.DateTimeField()
    expires = serializers.DateTimeField(
        allow_null=True,
        help_text="When the API stops taking it (SIAMWEB_API_TOKEN_MAX_AGE_DAYS after it was "
        "made); null if tokens never expire",
    )


class AccountTokenApi(TokenApi):
    class OutputSerializer(TokenFactsSerializer):
        pass

    @extend_schema(
        summary="When your API token was made and when it expires (never the key itself)",
        responses={200: OutputSerializer, 404: NO_TOKEN, 429: TOO_MANY},
    )
    def get(self, request: Request) -> Response:
        token = api_token_of(user=request.user)
        if token is None:
            raise NotFound("you have no API token: POST /api/v1/account/token/rotate makes one")
        return Response(self.OutputSerializer(token).data)

    @extend_schema(
        summary="Revoke your API token: requests that carry it are refused from now on",
        responses={204: None, 404: NO_TOKEN, 429: TOO_MANY},
    )
    def delete(self, request: Request) -> Response:
        if not api_token_revoke(user=request.user):
            raise NotFound("you have no API token")
        return Response(status=status.HTTP_204_NO_CONTENT)


class AccountTokenRotateApi(TokenApi):
    class OutputSerializer(TokenFactsSerializer):
        key = serializers.CharField(help_text="The new key: shown this once")

    @extend_schema(
        summary="A new API token for you (made if you had none); the old key stops working at once",
        request=None,
        responses={201: OutputSerializer, 429: TOO_MANY},
    )
    def post(self, request: Request) -> Response:
        token = ApiToken.of(api_token_rotate(user=request.user).token)
        return Response(self.OutputSerializer(token).data, status=status.HTTP_201_CREATED)


class AccountSignedInApi(JsonApi):
    """Whether the caller is signed in (an API token or a session): 204, or 401 and nothing else
    (an address throttled for invalid tokens included), since nginx's ``auth_request`` asks this
    before it reads an upload's body and takes any other answer for a failure."""

    @extend_schema(
        summary="204 when the caller is signed in (a token or a session), 401 when not; with "
        "role=admin, 403 when the caller is signed in but not an admin",
        parameters=[
            OpenApiParameter(
                "role", str, enum=["admin"], required=False,
                description="admin: the caller must be an admin (nginx asks this before it "
                "reads a taxonomy file, which only admins may import)",
            )
        ],
        responses={204: None, 400: BAD_REQUEST, 403: FORBIDDEN},
    )  # fmt: skip
    def get(self, request: Request) -> Response:
        role = request.query_params.get("role")
        if role not in (None, "admin"):
            return field_error("role", f"must be admin or absent, not {role!r}")
        if role == "admin" and not request.user.is_staff:
            raise PermissionDenied("only admins may send this")
        return Response(status=status.HTTP_204_NO_CONTENT)

    def handle_exception(self, exc):
        if isinstance(exc, (Throttled, AuthenticationFailed, NotAuthenticated)):
            exc = NotAuthenticated(str(getattr(exc, "detail", exc)))
        return super().handle_exception(exc)
