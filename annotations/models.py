"""What the curators work on: taxonomies, their groups and member strings, inputs, predictions,
the review queue, verdicts and the feedback pairs those verdicts yield."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class Taxonomy(models.Model):
    class Format(models.TextChoices):
        CSV = "csv", "Generic CSV"
        ONET = "onet", "O*NET"
        ESCO = "esco", "ESCO"

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    # How curators should decide, written by admins in Markdown, shown beside every card.
    guidelines = models.TextField(blank=True)
    source_format = models.CharField(max_length=16, choices=Format.choices, default=Format.CSV)
    # sha256 of the last imported file(s): lets a repeated import of the same data do nothing.
    source_sha256 = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "taxonomies"
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Group(models.Model):
    taxonomy = models.ForeignKey(Taxonomy, on_delete=models.CASCADE, related_name="groups")
    code = models.CharField(max_length=64)
    name = models.CharField(max_length=300)
    description = models.TextField(blank=True)

    class Meta:
        ordering = ["taxonomy", "code"]
        constraints = [
            models.UniqueConstraint(fields=["taxonomy", "code"], name="group_code_unique"),
        ]
        indexes = [models.Index(fields=["taxonomy", "name"])]

    def __str__(self) -> str:
        return f"{self.code} {self.name}"


class GroupRelation(models.Model):
    """Two groups the taxonomy itself calls related (O*NET "Related Occupations"): the likeliest
    confusions, used as hard negatives in training."""

    taxonomy = models.ForeignKey(Taxonomy, on_delete=models.CASCADE, related_name="relations")
    group = models.ForeignKey(Group, on_delete=models.CASCADE, related_name="+")
    related = models.ForeignKey(Group, on_delete=models.CASCADE, related_name="+")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["group", "related"], name="group_relation_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.group} ~ {self.related}"


class Member(models.Model):
    """One string that belongs to a group: a taxonomy title or a curator's confirmed input."""

    class Source(models.TextChoices):
        TAXONOMY = "taxonomy", "Taxonomy import"
        CURATOR = "curator", "Curator verdict"
        ADMIN = "admin", "Admin edit"

    taxonomy = models.ForeignKey(Taxonomy, on_delete=models.CASCADE, related_name="members")
    group = models.ForeignKey(Group, on_delete=models.CASCADE, related_name="members")
    text = models.CharField(max_length=500)
    normalized_text = models.CharField(max_length=500)
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.TAXONOMY)
    added_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    # The verdict that added a curator member: undoing that verdict removes exactly this row.
    judgement = models.ForeignKey(
        "Judgement", null=True, blank=True, on_delete=models.SET_NULL, related_name="members"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["group", "text"]
        constraints = [
            models.UniqueConstraint(
                fields=["group", "normalized_text"], name="member_text_unique_in_group"
            ),
        ]
        indexes = [models.Index(fields=["taxonomy", "normalized_text"])]

    def __str__(self) -> str:
        return self.text


class Input(models.Model):
    """A raw string sent for normalization; repeated sends count occurrences, not new rows."""

    class Source(models.TextChoices):
        API = "api", "API"
        UPLOAD = "upload", "CSV upload"
        PLAYGROUND = "playground", "Playground"
        DEMO = "demo", "Demo seed"
        COMMAND = "command", "Command line"

    taxonomy = models.ForeignKey(Taxonomy, on_delete=models.CASCADE, related_name="inputs")
    text = models.CharField(max_length=500)
    normalized_text = models.CharField(max_length=500)
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.API)
    occurrences = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["taxonomy", "normalized_text"], name="input_text_unique"
            ),
        ]
        # The inputs page lists one taxonomy's newest inputs first.
        indexes = [models.Index(fields=["taxonomy", "-id"], name="input_newest_by_taxonomy")]

    def __str__(self) -> str:
        return self.text


class Prediction(models.Model):
    """The ranked groups a model version gave one input."""

    input = models.ForeignKey(Input, on_delete=models.CASCADE, related_name="predictions")
    model_version = models.ForeignKey(
        "models_app.ModelVersion", on_delete=models.PROTECT, related_name="predictions"
    )
    # [{"group_id", "code", "name", "score", "member_id", "member"}, ...], best first.
    ranked_groups = models.JSONField()
    top_group = models.ForeignKey(
        Group, null=True, on_delete=models.SET_NULL, related_name="top_predictions"
    )
    top_score = models.FloatField(null=True)
    # Top score minus the runner-up: small margins are what the review queue shows first.
    margin = models.FloatField(null=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.input} → {self.top_group}"


class ReviewItem(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        AWAITING_GROUP = "awaiting_group", "False match, awaiting the right group"
        DONE = "done", "Done"
        SKIPPED = "skipped", "Skipped"

    OPEN_STATUSES = (Status.PENDING, Status.AWAITING_GROUP)

    input = models.OneToOneField(Input, on_delete=models.CASCADE, related_name="review_item")
    # Copied from the input and the prediction so that the queue's filters and orderings are
    # answered by an index over this one table, even with 100,000 items waiting.
    taxonomy = models.ForeignKey(Taxonomy, on_delete=models.CASCADE, related_name="review_items")
    prediction = models.ForeignKey(Prediction, on_delete=models.PROTECT, related_name="+")
    top_group = models.ForeignKey(
        Group, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    top_score = models.FloatField(null=True, blank=True)
    # The top group before a new model version changed the answer, while nobody had judged
    # it: such items go to curators first, marked as such.
    changed_from = models.ForeignKey(
        Group, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    # Higher first; set from the prediction so the queue needs no computation to order.
    priority = models.FloatField(default=0.0)
    # A sampled share of items is judged by two curators, to measure agreement.
    reviews_required = models.PositiveSmallIntegerField(default=1)
    # Who holds the item now and until when: two curators never get the same card at once.
    leased_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    # Curators disagreed on this input: an admin decides.
    conflict = models.BooleanField(default=False)
    # The product vouched for its answer under the taxonomy's auto-coding policy: coded without
    # review (``auto_coded``, status done), or drawn for the audit (``audit``, queued as any
    # other item and never shown as one). ``vouched_group`` is the answer it vouched for.
    auto_coded = models.BooleanField(default=False)
    audit = models.BooleanField(default=False)
    vouched_group = models.ForeignKey(
        Group, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    vouched_threshold = models.FloatField(null=True, blank=True)
    vouched_policy_version = models.PositiveIntegerField(null=True, blank=True)
    # Whose send queued the item (an API call, an upload, the playground, a bulk job): one user
    # may have at most SIAMWEB_REVIEW_PENDING_PER_USER open. None: the system's own.
    queued_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The bulk job that last sent the item for review (a models_app BulkJob's id, not a key:
    # curation does not depend on bulk), so its "review them" link opens exactly its rows.
    bulk_job_id = models.BigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-priority", "id"]
        indexes = [
            models.Index(
                fields=["bulk_job_id", "status", "-priority", "id"],
                condition=Q(bulk_job_id__isnull=False),
                name="review_queue_by_bulk_job",
            ),
            models.Index(
                fields=["queued_by"],
                condition=Q(status__in=["pending", "awaiting_group"]),
                name="review_open_by_sender",
            ),
            models.Index(
                fields=["taxonomy", "status", "-priority", "id"], name="review_queue_order"
            ),
            models.Index(
                fields=["taxonomy", "status", "top_group", "-priority", "id"],
                name="review_queue_by_group",
            ),
            models.Index(fields=["status", "-priority", "id"], name="review_queue_all"),
            models.Index(
                fields=["taxonomy", "conflict"],
                condition=Q(conflict=True),
                name="review_conflicts",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.input} ({self.status})"


class AutoCodingPolicy(models.Model):
    """A taxonomy's auto-coding: answers whose probability shows ``target_precision`` (None:
    off) are coded without review, except a random ``audit_share`` of them, judged blind. The
    version moves on every change, and an answer records the version it was coded under."""

    taxonomy = models.OneToOneField(Taxonomy, on_delete=models.CASCADE, related_name="auto_coding")
    target_precision = models.FloatField(null=True, blank=True)
    audit_share = models.FloatField(default=0.05)
    version = models.PositiveIntegerField(default=0)
    # Paused by its own audit (it showed the precision below the target: the audited
    # precision's one-sided upper bound fell below it): nothing is auto-coded until an admin
    # sets the policy again.
    paused_at = models.DateTimeField(null=True, blank=True)
    paused_reason = models.TextField(blank=True)
    # The last version its audit paused, kept when an admin sets the policy again: a bulk job
    # still coding under that version or an earlier one stops (``models_app.bulk.run``).
    paused_version = models.PositiveIntegerField(null=True, blank=True)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        state = "off" if self.target_precision is None else f"target {self.target_precision}"
        return f"auto-coding of {self.taxonomy_id}: {state} (v{self.version})"

    @property
    def active(self) -> bool:
        return self.target_precision is not None and self.paused_at is None


class JudgementQuerySet(models.QuerySet):
    def live(self) -> JudgementQuerySet:
        """Verdicts that still count: not undone."""
        return self.filter(undone_at__isnull=True)


class Judgement(models.Model):
    """A curator's verdict on one review item, stored before the response returns."""

    # The verdicts that settle where an input belongs (false match and skip only narrow it).
    FINAL_VERDICTS = ("confirm", "reassign", "none")

    class Verdict(models.TextChoices):
        CONFIRM = "confirm", "Confirm"
        FALSE_MATCH = "false_match", "False match"
        REASSIGN = "reassign", "Reassign"
        NONE = "none", "None of these"
        SKIP = "skip", "Skip"

    review_item = models.ForeignKey(ReviewItem, on_delete=models.CASCADE, related_name="judgements")
    verdict = models.CharField(max_length=16, choices=Verdict.choices)
    # The group the input belongs to (confirm, reassign) ...
    group = models.ForeignKey(
        Group, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    # ... and the group it was wrongly matched to (false match, reassign).
    rejected_group = models.ForeignKey(
        Group, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT)
    # The prediction the curator saw.
    prediction = models.ForeignKey(
        Prediction, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The item's status before this verdict, so that undo can put it back.
    previous_status = models.CharField(max_length=16, blank=True)
    # A client's key for one verdict: a retried request finds this row instead of adding one.
    idempotency_key = models.CharField(max_length=100, blank=True)
    # The verdicts one batch-review submit recorded share this: the batch is undone whole,
    # from its result page or later from the batch pages.
    batch = models.UUIDField(null=True, blank=True, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # An undone verdict stays for the audit trail but no longer counts anywhere.
    undone_at = models.DateTimeField(null=True, blank=True)

    class Settlement(models.TextChoices):
        OVERRULED = "overruled", "Overruled by an admin's settlement"
        SETTLED = "settled", "An admin's settlement"

    # Where an admin settled curators' disagreement: the verdict the settlement undid still shows
    # what its curator said (agreement counts it, "taken back" does not), and the admin's own
    # verdict is no third curator's.
    settlement = models.CharField(max_length=16, choices=Settlement.choices, blank=True)

    objects = JudgementQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["user", "-created_at"], name="judgement_by_user")]
        constraints = [
            models.UniqueConstraint(
                fields=["user", "idempotency_key"],
                condition=~Q(idempotency_key=""),
                name="judgement_idempotency_key_unique",
            ),
            models.CheckConstraint(
                condition=(
                    Q(verdict="confirm", group__isnull=False, rejected_group__isnull=True)
                    | Q(verdict="reassign", group__isnull=False)
                    | Q(verdict="false_match", group__isnull=True, rejected_group__isnull=False)
                    | Q(verdict__in=["none", "skip"], group__isnull=True)
                ),
                name="judgement_groups_match_verdict",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.verdict} by {self.user} on {self.review_item}"


class ReviewFlag(models.Model):
    """A curator's note on a review item for the admins: unsure of the verdict, a group the
    taxonomy lacks, or a comment. Not a verdict: the item stays in the queue as it was."""

    class Kind(models.TextChoices):
        UNSURE = "unsure", "Unsure"
        TAXONOMY_GAP = "taxonomy_gap", "Taxonomy gap"
        COMMENT = "comment", "Comment"

    COMMENT_MAX_LENGTH = 1000

    review_item = models.ForeignKey(ReviewItem, on_delete=models.CASCADE, related_name="flags")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    comment = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # An admin who dealt with it; open flags are the ones the admins' list shows first.
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(
                fields=["-id"], condition=Q(resolved_at__isnull=True), name="review_flags_open"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} by {self.user} on {self.review_item}"


class FeedbackPair(models.Model):
    """A training pair: two strings and whether they mean the same group."""

    class Origin(models.TextChoices):
        CONFIRM = "confirm", "Curator confirmed"
        FALSE_MATCH = "false_match", "Curator rejected the match"
        REASSIGN = "reassign", "Curator reassigned"
        REASSIGN_NEGATIVE = "reassign_negative", "Wrong match of a reassignment (hard negative)"

    taxonomy = models.ForeignKey(Taxonomy, on_delete=models.CASCADE, related_name="feedback_pairs")
    text_a = models.CharField(max_length=500)
    text_b = models.CharField(max_length=500)
    # The group text_b stands for: where text_a belongs (label) or where it does not.
    group = models.ForeignKey(
        Group, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    label = models.BooleanField(help_text="True when both texts belong to one group")
    origin = models.CharField(max_length=24, choices=Origin.choices)
    judgement = models.ForeignKey(
        Judgement, null=True, blank=True, on_delete=models.SET_NULL, related_name="feedback_pairs"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        relation = "=" if self.label else "≠"
        return f"{self.text_a} {relation} {self.text_b}"


class AuditEvent(models.Model):
    """Who changed what, when, and the values before and after: verdicts and taxonomy edits."""

    # Every action recorded, "<entity>.<action>": audit_record refuses any other, so the audit
    # page's filter, which offers these, cannot fall behind what is written.
    ACTIONS = (
        "taxonomy.import",
        "taxonomy.guidelines",
        "group.create",
        "group.rename",
        "group.merge",
        "member.add",
        "member.move",
        "member.remove",
        "input.submit",
        "inputs.upload",
        "judgement.create",
        "judgement.undo",
        "review_item.resolve_conflict",
        "review_flag.create",
        "review_flag.resolve",
        "training_run.promote",
        "training_run.cancel",
        "model_version.rollback",
        "deployment.activate",
        "api_token.create",
        "api_token.rotate",
        "api_token.revoke",
        "auto_coding.set",
        "auto_coding.pause",
        "auto_coding.reopen",
    )

    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    taxonomy = models.ForeignKey(
        Taxonomy, null=True, blank=True, on_delete=models.SET_NULL, related_name="audit_events"
    )
    action = models.CharField(max_length=64)  # one of ACTIONS
    object_type = models.CharField(max_length=64)
    object_id = models.CharField(max_length=64, blank=True)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["taxonomy", "-created_at"], name="audit_by_taxonomy"),
            models.Index(fields=["object_type", "object_id"], name="audit_by_object"),
        ]

    def __str__(self) -> str:
        return f"{self.action} {self.object_type}:{self.object_id} by {self.actor}"


class TaxonomyRevision(models.Model):
    """A number that grows with every committed change to a taxonomy's members, groups or
    verdicts (and deletion of its review items), so a process may keep what normalizing reads
    (hit members, curators' verdicts, rejected groups) and check one row per request instead of
    reading it all again.

    Written by database triggers (migration 0012), not by services: every writer, a bulk
    import, a merge's UPDATE or raw SQL, bumps it, and on PostgreSQL the bump runs at commit,
    after every other lock the transaction takes, so it orders no writers into a deadlock.
    No foreign key: a taxonomy being deleted bumps its row on the way out.
    """

    taxonomy_id = models.BigIntegerField(primary_key=True)
    revision = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"taxonomy {self.taxonomy_id} at revision {self.revision}"
