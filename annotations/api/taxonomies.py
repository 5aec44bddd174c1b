"""Taxonomies, their groups and member strings: read by curators, edited by admins through the
taxonomy edit services."""

from __future__ import annotations

from drf_spectacular.utils import (
    OpenApiResponse,
    extend_schema,
)
from rest_framework import serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from annotations.api.base import (
    MemberSourceField,
    edit_error_response,
)
from annotations.api.reads import (
    group_or_404,
    groups_queryset,
    members_queryset,
    taxonomies,
    taxonomy_with_counts,
)
from annotations.api.serializers import GroupRefSerializer, ModelVersionRefSerializer
from annotations.importers import (
    CODE_FORBIDDEN,
    MAX_CODE_LENGTH,
    MAX_NAME_LENGTH,
    ImportFileError,
)
from annotations.models import (
    Group,
    Taxonomy,
)
from annotations.selectors.queue import QueueFilters
from annotations.selectors.stats import review_counts
from annotations.services.taxonomy import ImportRejected
from annotations.services.taxonomy_edit.checks import TaxonomyEditError
from annotations.services.taxonomy_edit.groups import group_create, group_merge, group_rename
from annotations.services.taxonomy_edit.members import member_add, member_move, member_remove
from annotations.services.taxonomy_upload import taxonomy_import_upload
from annotations.signals import TaxonomyCannotServe, taxonomy_serve_request
from siamweb.web.api import (
    BAD_REQUEST,
    FORBIDDEN,
    NOT_FOUND,
    AdminApi,
    CuratorApi,
    CuratorReadsAdminWritesApi,
    PagePagination,
    field_error,
    filters_of,
    object_or_404,
    paginated,
    taxonomy_or_404,
)
from siamweb.web.fields import CleanTextField, IdField

# Bad rows listed in a refusal; the count says how many there were in all.
MAX_ROW_ERRORS = 200


class TaxonomySerializer(serializers.Serializer):
    slug = serializers.SlugField()
    name = serializers.CharField()
    description = serializers.CharField()
    guidelines = serializers.CharField(help_text="How curators should decide, in Markdown")
    source_format = serializers.CharField()
    live_model_version = ModelVersionRefSerializer(
        source="deployment.index_build.model_version", allow_null=True
    )
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class TaxonomyListApi(CuratorReadsAdminWritesApi):
    pagination_class = PagePagination
    parser_classes = [MultiPartParser]

    class OutputSerializer(TaxonomySerializer):
        pass

    class ImportInputSerializer(serializers.Serializer):
        slug = serializers.SlugField(
            max_length=64, help_text="An existing taxonomy's slug updates it from the file"
        )
        format = serializers.ChoiceField(choices=Taxonomy.Format.choices)
        file = serializers.FileField(
            help_text="csv: group_code, group_name, text[, description]; onet: a .zip of the "
            "O*NET text files; esco: occupations_en.csv"
        )
        name = serializers.CharField(max_length=200, required=False, allow_blank=True)
        skip_bad_rows = serializers.BooleanField(
            required=False, default=False, help_text="Import the good rows, list the bad ones"
        )
        serve = serializers.BooleanField(
            required=False,
            default=True,
            help_text="Queue what makes it serve, as the page's import does: the pretrained "
            "tower for a new taxonomy (its training follows), a reindex for a live one",
        )

    class ImportOutputSerializer(serializers.Serializer):
        taxonomy = TaxonomySerializer()
        summary = serializers.CharField()
        created = serializers.BooleanField()
        rows_read = serializers.IntegerField()
        members_created = serializers.IntegerField()
        members_removed = serializers.IntegerField()
        skipped_rows = serializers.ListField(child=serializers.CharField())
        queued_run = serializers.IntegerField(allow_null=True)
        not_serving_reason = serializers.CharField(
            allow_null=True, help_text="Why no run was queued to serve it, when none could be"
        )

    @extend_schema(summary="Taxonomies", responses=OutputSerializer(many=True))
    def get(self, request: Request) -> Response:
        return paginated(self, request, taxonomies().order_by("slug"), self.OutputSerializer)

    @extend_schema(
        summary="Import a taxonomy file (admins): create or update, all or nothing",
        request={"multipart/form-data": ImportInputSerializer},
        responses={201: ImportOutputSerializer, 400: BAD_REQUEST, 403: FORBIDDEN},
    )
    def post(self, request: Request) -> Response:
        serializer = self.ImportInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        try:
            report = taxonomy_import_upload(
                upload=data["file"],
                fmt=data["format"],
                slug=data["slug"],
                name=data.get("name", "").strip() or None,
                user=request.user,
                skip_bad_rows=data["skip_bad_rows"],
            )
        except ImportFileError as exc:
            return field_error(exc.field, str(exc))
        except ImportRejected as exc:
            rows = [str(error) for error in exc.errors[:MAX_ROW_ERRORS]]
            return Response({"file": [str(exc)], "rows": rows}, status=status.HTTP_400_BAD_REQUEST)
        run, not_serving = None, None
        if data["serve"]:
            try:
                run = taxonomy_serve_request(taxonomy=report.taxonomy, requested_by=request.user)
            except TaxonomyCannotServe as exc:
                not_serving = str(exc)
        body = {
            "taxonomy": taxonomies().get(id=report.taxonomy.id),
            "summary": report.summary(),
            "created": report.taxonomy_created,
            "rows_read": report.rows_read,
            "members_created": report.members_created,
            "members_removed": report.members_removed,
            "skipped_rows": [str(error) for error in report.skipped_rows[:MAX_ROW_ERRORS]],
            "queued_run": run.id if run is not None else None,
            "not_serving_reason": not_serving,
        }
        return Response(self.ImportOutputSerializer(body).data, status=status.HTTP_201_CREATED)


class TaxonomyCountsSerializer(serializers.Serializer):
    groups = serializers.IntegerField()
    members = serializers.IntegerField()
    pending_items = serializers.IntegerField(help_text="Open: pending or awaiting a group")
    skipped_items = serializers.IntegerField()
    done_items = serializers.IntegerField()
    conflicts = serializers.IntegerField()


class TaxonomyDetailApi(CuratorApi):
    class OutputSerializer(TaxonomySerializer):
        counts = TaxonomyCountsSerializer()

    @extend_schema(
        summary="One taxonomy with its counts and live model version",
        responses={200: OutputSerializer, 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str) -> Response:
        return Response(self.OutputSerializer(taxonomy_with_counts(slug)).data)


class GroupSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    taxonomy = serializers.CharField(source="taxonomy.slug")
    code = serializers.CharField()
    name = serializers.CharField()
    description = serializers.CharField()
    member_count = serializers.IntegerField()


class GroupListCreateApi(CuratorReadsAdminWritesApi):
    pagination_class = PagePagination

    class FilterSerializer(serializers.Serializer):
        q = serializers.CharField(
            required=False, max_length=200, help_text="Words the name (or code start) has"
        )

    class OutputSerializer(GroupSerializer):
        pass

    class CreateInputSerializer(serializers.Serializer):
        # The pattern states the '/' of the code rule; the service applies the whole rule
        # (group_code_problem): the schema's text pattern is built from characters a field
        # forbids (text_pattern), and refusing two whole values is not one of them.
        code = CleanTextField(
            max_length=MAX_CODE_LENGTH,
            forbidden=CODE_FORBIDDEN,
            help_text="A path segment of the group's page: no '/', and neither '.' nor '..'",
        )
        name = CleanTextField(max_length=MAX_NAME_LENGTH)

    @extend_schema(
        summary="Groups of a taxonomy",
        parameters=[FilterSerializer],
        responses={200: OutputSerializer(many=True), 400: BAD_REQUEST, 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str) -> Response:
        taxonomy = taxonomy_or_404(slug)
        filters = filters_of(self.FilterSerializer, request)
        groups = groups_queryset(taxonomy, filters.get("q", ""))
        return paginated(self, request, groups, self.OutputSerializer)

    @extend_schema(
        summary="Create an empty group (admins)",
        request=CreateInputSerializer,
        responses={
            201: OutputSerializer,
            400: BAD_REQUEST,
            403: FORBIDDEN,
            404: NOT_FOUND,
            409: OpenApiResponse(description="The code is already taken in this taxonomy"),
        },
    )
    def post(self, request: Request, slug: str) -> Response:
        taxonomy = taxonomy_or_404(slug)
        serializer = self.CreateInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            group = group_create(taxonomy=taxonomy, user=request.user, **serializer.validated_data)
        except TaxonomyEditError as exc:
            return edit_error_response(exc)
        return Response(
            self.OutputSerializer(group_or_404(group.id)).data, status=status.HTTP_201_CREATED
        )


# What a rename refuses to change, by field, and why.
_NOT_RENAMED = {
    "code": "a group's code cannot be changed: exports, verdicts and other systems hold the "
    "group by it; create a group with the new code and merge this one into it",
    "description": "cannot be changed here: this renames a group (name) and changes nothing "
    "else; a description comes with the taxonomy's import",
}


class GroupDetailApi(CuratorReadsAdminWritesApi):
    class OutputSerializer(GroupSerializer):
        pending_items = serializers.IntegerField(help_text="Pending items predicted as this group")

    class RenameInputSerializer(serializers.Serializer):
        name = CleanTextField(max_length=MAX_NAME_LENGTH)

        def to_internal_value(self, data):
            # A new code or description is refused by name, not ignored: the caller would be
            # told only that a name is missing, or believe it changed. The group's own values,
            # sent back as a GET gave them, change nothing and pass.
            group = self.context["group"]
            if isinstance(data, dict) and (
                changed := sorted(
                    field
                    for field in _NOT_RENAMED
                    if field in data and data[field] != getattr(group, field)
                )
            ):
                raise serializers.ValidationError(
                    {field: [_NOT_RENAMED[field]] for field in changed}
                )
            return super().to_internal_value(data)

    def _detail(self, pk: int) -> dict:
        group = group_or_404(pk)
        group.pending_items = review_counts(filters=QueueFilters(group=group))["open"]
        return self.OutputSerializer(group).data

    @extend_schema(summary="One group", responses={200: OutputSerializer, 404: NOT_FOUND})
    def get(self, request: Request, group_id: int) -> Response:
        return Response(self._detail(group_id))

    @extend_schema(
        summary="Rename a group (admins)",
        request=RenameInputSerializer,
        responses={200: OutputSerializer, 400: BAD_REQUEST, 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def patch(self, request: Request, group_id: int) -> Response:
        group = group_or_404(group_id)
        serializer = self.RenameInputSerializer(data=request.data, context={"group": group})
        serializer.is_valid(raise_exception=True)
        try:
            group_rename(group=group, name=serializer.validated_data["name"], user=request.user)
        except TaxonomyEditError as exc:
            return edit_error_response(exc)
        return Response(self._detail(group_id))


class GroupMergeApi(AdminApi):
    class InputSerializer(serializers.Serializer):
        into = IdField(
            queryset=Group.objects.all(), help_text="The group that takes this one's members"
        )

    class OutputSerializer(GroupSerializer):
        pass

    @extend_schema(
        summary="Merge this group into another (admins); answers the group merged into",
        request=InputSerializer,
        responses={200: OutputSerializer, 400: BAD_REQUEST, 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def post(self, request: Request, group_id: int) -> Response:
        source = group_or_404(group_id)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            target = group_merge(
                source=source, target=serializer.validated_data["into"], user=request.user
            )
        except TaxonomyEditError as exc:
            return edit_error_response(exc, fields={"target": "into", "source": "group"})
        return Response(self.OutputSerializer(group_or_404(target.id)).data)


class MemberSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    taxonomy = serializers.CharField(source="taxonomy.slug")
    group = GroupRefSerializer()
    text = serializers.CharField()
    source = MemberSourceField()
    added_by = serializers.CharField(source="added_by.username", allow_null=True)
    judgement = serializers.IntegerField(source="judgement_id", allow_null=True)
    created_at = serializers.DateTimeField()


class MemberListCreateApi(CuratorReadsAdminWritesApi):
    pagination_class = PagePagination

    class FilterSerializer(serializers.Serializer):
        group = IdField(queryset=Group.objects.all(), required=False)
        source = MemberSourceField(required=False)

    class OutputSerializer(MemberSerializer):
        pass

    class CreateInputSerializer(serializers.Serializer):
        group = IdField(queryset=Group.objects.all())
        text = CleanTextField()

    class CreateOutputSerializer(MemberSerializer):
        also_in = GroupRefSerializer(
            many=True, help_text="Other groups of the taxonomy that have the same text"
        )

    @extend_schema(
        summary="Member strings of a taxonomy",
        parameters=[FilterSerializer],
        responses={200: OutputSerializer(many=True), 400: BAD_REQUEST, 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str) -> Response:
        taxonomy = taxonomy_or_404(slug)
        filters = filters_of(self.FilterSerializer, request)
        group = filters.get("group")
        if group is not None and group.taxonomy_id != taxonomy.id:
            return field_error("group", f"group {group.id} is not in taxonomy {slug}")
        members = members_queryset().filter(taxonomy=taxonomy)
        if group is not None:
            members = members.filter(group=group)
        if "source" in filters:
            members = members.filter(source=filters["source"])
        return paginated(self, request, members.order_by("id"), self.OutputSerializer)

    @extend_schema(
        summary="Add a member string to a group (admins)",
        request=CreateInputSerializer,
        responses={201: CreateOutputSerializer, 400: BAD_REQUEST, 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def post(self, request: Request, slug: str) -> Response:
        taxonomy = taxonomy_or_404(slug)
        serializer = self.CreateInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        group = serializer.validated_data["group"]
        if group.taxonomy_id != taxonomy.id:
            return field_error("group", f"group {group.id} is not in taxonomy {slug}")
        try:
            member = member_add(
                group=group, text=serializer.validated_data["text"], user=request.user
            )
        except TaxonomyEditError as exc:
            return edit_error_response(exc)
        created = object_or_404(members_queryset(), member.id, "member")
        created.also_in = member.also_in
        return Response(self.CreateOutputSerializer(created).data, status=status.HTTP_201_CREATED)


class MemberDetailApi(CuratorReadsAdminWritesApi):
    class OutputSerializer(MemberSerializer):
        pass

    class MoveInputSerializer(serializers.Serializer):
        group = IdField(queryset=Group.objects.all(), help_text="The group the member moves to")

    @extend_schema(summary="One member string", responses={200: OutputSerializer, 404: NOT_FOUND})
    def get(self, request: Request, member_id: int) -> Response:
        return Response(
            self.OutputSerializer(object_or_404(members_queryset(), member_id, "member")).data
        )

    @extend_schema(
        summary="Move a member string to another group (admins)",
        request=MoveInputSerializer,
        responses={200: OutputSerializer, 400: BAD_REQUEST, 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def patch(self, request: Request, member_id: int) -> Response:
        member = object_or_404(members_queryset(), member_id, "member")
        serializer = self.MoveInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            member_move(member=member, group=serializer.validated_data["group"], user=request.user)
        except TaxonomyEditError as exc:
            return edit_error_response(exc)
        return Response(
            self.OutputSerializer(object_or_404(members_queryset(), member_id, "member")).data
        )

    @extend_schema(
        summary="Remove a member string (admins)",
        responses={204: None, 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def delete(self, request: Request, member_id: int) -> Response:
        member = object_or_404(members_queryset(), member_id, "member")
        try:
            member_remove(member=member, user=request.user)
        except TaxonomyEditError as exc:
            return edit_error_response(exc)
        return Response(status=status.HTTP_204_NO_CONTENT)
