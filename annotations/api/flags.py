"""REST API, version 1: curators' flags on review items, and the admins' list of them."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, PolymorphicProxySerializer, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from annotations.models import ReviewFlag, ReviewItem
from annotations.selectors.flags import review_flags
from annotations.services.flags import (
    FlagError,
    review_flag_create,
    review_flag_resolve,
)
from siamweb.web.api import (
    BAD_REQUEST,
    CONFLICT,
    FORBIDDEN,
    NOT_FOUND,
    AdminApi,
    CuratorApi,
    CursorNewestFirst,
    field_error,
    filters_of,
    object_or_404,
    paginated,
)
from siamweb.web.fields import CleanMultilineTextField, named_choice_field

FlagKindField = named_choice_field("ReviewFlagKind", ReviewFlag.Kind.choices)
# The request's two shapes, for the schema only: a bare comment needs its comment (a blank one is
# a 400 naming it), the other kinds may carry one.
CommentKindField = named_choice_field(
    "ReviewFlagCommentKind",
    [(k, label) for k, label in ReviewFlag.Kind.choices if k == ReviewFlag.Kind.COMMENT],
)
OtherKindField = named_choice_field(
    "ReviewFlagOtherKind",
    [(k, label) for k, label in ReviewFlag.Kind.choices if k != ReviewFlag.Kind.COMMENT],
)
FlagStatusField = named_choice_field(
    "ReviewFlagStatus",
    [("open", "Not resolved yet"), ("resolved", "Resolved by an admin"), ("all", "Both")],
)


class ReviewFlagSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    review_item = serializers.IntegerField(source="review_item_id")
    taxonomy = serializers.CharField(source="review_item.taxonomy.slug")
    text = serializers.CharField(source="review_item.input.text")
    kind = FlagKindField()
    comment = serializers.CharField(allow_blank=True)
    user = serializers.CharField(source="user.username")
    created_at = serializers.DateTimeField()
    resolved_at = serializers.DateTimeField(allow_null=True)
    resolved_by = serializers.CharField(source="resolved_by.username", allow_null=True)


def _flags():
    return ReviewFlag.objects.select_related(
        "review_item__input", "review_item__taxonomy", "user", "resolved_by"
    )


def _flag_error(exc: FlagError) -> Response:
    code = status.HTTP_409_CONFLICT if exc.field == "flag" else status.HTTP_400_BAD_REQUEST
    return field_error(exc.field, str(exc), code)


def _comment_field(**kwargs) -> CleanMultilineTextField:
    return CleanMultilineTextField(max_length=ReviewFlag.COMMENT_MAX_LENGTH, **kwargs)


class ReviewItemFlagCreateApi(CuratorApi):
    class InputSerializer(serializers.Serializer):
        kind = FlagKindField()
        comment = _comment_field(
            required=False,
            allow_blank=True,
            help_text="Required when kind is comment; line breaks and tabs allowed",
        )

    class CommentInputSerializer(serializers.Serializer):
        kind = CommentKindField()
        comment = _comment_field(help_text="The comment, not blank; line breaks and tabs allowed")

    class OtherInputSerializer(serializers.Serializer):
        kind = OtherKindField()
        comment = _comment_field(
            required=False, allow_blank=True, help_text="Optional; line breaks and tabs allowed"
        )

    class OutputSerializer(ReviewFlagSerializer):
        pass

    @extend_schema(
        summary="Flag a review item for the admins (not a verdict: the item stays as it is)",
        description=(
            "The same flag sent again (same user, kind and comment on the item) while the first "
            "is open answers 200 with the first, and stores nothing new."
        ),
        request=PolymorphicProxySerializer(
            component_name="ReviewItemFlagCreateApiInput",
            serializers=[CommentInputSerializer, OtherInputSerializer],
            resource_type_field_name=None,
            many=False,
        ),
        responses={
            201: OutputSerializer,
            200: OpenApiResponse(
                OutputSerializer, description="The same flag, still open: the one stored first"
            ),
            400: BAD_REQUEST,
            404: NOT_FOUND,
        },
    )
    def post(self, request: Request, item_id: int) -> Response:
        item = object_or_404(ReviewItem.objects.select_related("taxonomy"), item_id, "review item")
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        try:
            flag = review_flag_create(
                review_item=item,
                user=request.user,
                kind=data["kind"],
                comment=data.get("comment", ""),
            )
        except FlagError as exc:
            return _flag_error(exc)
        code = status.HTTP_200_OK if flag.replayed else status.HTTP_201_CREATED
        stored = object_or_404(_flags(), flag.id, "flag")
        return Response(self.OutputSerializer(stored).data, status=code)


class ReviewFlagListApi(AdminApi):
    pagination_class = CursorNewestFirst

    class FilterSerializer(serializers.Serializer):
        kind = FlagKindField(required=False)
        status = FlagStatusField(required=False, default="open")

    class OutputSerializer(ReviewFlagSerializer):
        pass

    @extend_schema(
        summary="Curators' flags, newest first (open ones unless status says otherwise)",
        parameters=[FilterSerializer],
        responses={200: OutputSerializer(many=True), 400: BAD_REQUEST, 403: FORBIDDEN},
    )
    def get(self, request: Request) -> Response:
        filters = filters_of(self.FilterSerializer, request)
        resolved = {"open": False, "resolved": True, "all": None}[filters["status"]]
        flags = review_flags(kind=filters.get("kind"), resolved=resolved)
        return paginated(self, request, flags, self.OutputSerializer)


class ReviewFlagResolveApi(AdminApi):
    class OutputSerializer(ReviewFlagSerializer):
        pass

    @extend_schema(
        summary="Mark a flag dealt with",
        request=None,
        responses={200: OutputSerializer, 403: FORBIDDEN, 404: NOT_FOUND, 409: CONFLICT},
    )
    def post(self, request: Request, flag_id: int) -> Response:
        flag = object_or_404(ReviewFlag.objects.all(), flag_id, "flag")
        try:
            review_flag_resolve(flag=flag, user=request.user)
        except FlagError as exc:
            return _flag_error(exc)
        return Response(self.OutputSerializer(object_or_404(_flags(), flag_id, "flag")).data)
