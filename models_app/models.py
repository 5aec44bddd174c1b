"""Which models and indexes exist, which one is live, and the runs that made them."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from annotations.models import Taxonomy


class ModelVersion(models.Model):
    """A trained encoder on disk, with the config and data it came from."""

    taxonomy = models.ForeignKey(Taxonomy, on_delete=models.CASCADE, related_name="model_versions")
    number = models.PositiveIntegerField()
    encoder_kind = models.CharField(max_length=64)
    config = models.JSONField(default=dict)
    artifact_path = models.CharField(max_length=500, help_text="Relative to the artifacts folder")
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children"
    )
    trained_on_members = models.PositiveIntegerField(default=0)
    # The last feedback pair this version was trained on: verdicts after it are "new" to it.
    feedback_until = models.BigIntegerField(default=0)
    data_sha256 = models.CharField(max_length=64, blank=True)
    metrics = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    went_live_at = models.DateTimeField(
        null=True, blank=True, help_text="When an index build of it first went live"
    )

    class Meta:
        ordering = ["taxonomy", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["taxonomy", "number"], name="model_number_unique"),
        ]

    def __str__(self) -> str:
        return self.label

    @property
    def label(self) -> str:
        return f"{self.taxonomy.slug}/v{self.number}"


class IndexBuild(models.Model):
    """A FAISS index of a taxonomy's members encoded by one model version."""

    taxonomy = models.ForeignKey(Taxonomy, on_delete=models.CASCADE, related_name="index_builds")
    model_version = models.ForeignKey(
        ModelVersion, on_delete=models.CASCADE, related_name="index_builds"
    )
    artifact_path = models.CharField(max_length=500, help_text="Relative to the artifacts folder")
    size = models.PositiveIntegerField()
    # Member ids only grow, so members above this id were added after the build; normalize
    # encodes them on the fly until the next build takes them in.
    max_member_id = models.BigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"index {self.pk} of {self.model_version}"


class RankerVersion(models.Model):
    """A ranker fitted on a taxonomy's verdicts for one model version (its features are that
    model's scores), with the verdict history it was fitted with; gated before it goes live."""

    class Status(models.TextChoices):
        LIVE = "live", "Live"
        RETIRED = "retired", "Replaced by a later ranker"
        REJECTED = "rejected", "Rejected by the gate"

    taxonomy = models.ForeignKey(Taxonomy, on_delete=models.CASCADE, related_name="rankers")
    model_version = models.ForeignKey(
        ModelVersion, on_delete=models.CASCADE, related_name="rankers"
    )
    number = models.PositiveIntegerField()
    status = models.CharField(max_length=16, choices=Status.choices)
    artifact_path = models.CharField(max_length=500, help_text="Relative to the artifacts folder")
    # The verdicts it learnt from: how many, and the newest one's id (later ones are new to it).
    verdicts = models.PositiveIntegerField(default=0)
    verdicts_until = models.BigIntegerField(default=0)
    # The features it reads (``FEATURE_SET``): a ranker of another set is due for a refit.
    feature_set = models.CharField(max_length=64, default="", blank=True)
    metrics = models.JSONField(default=dict, blank=True)
    gate_report = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["taxonomy", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["taxonomy", "number"], name="ranker_number_unique"),
        ]

    def __str__(self) -> str:
        return self.label

    @property
    def label(self) -> str:
        return f"{self.taxonomy.slug}/ranker {self.number}"


class Deployment(models.Model):
    """The live model and index of a taxonomy: one pointer, so both swap in one update; beside
    it the live ranker (serving ignores one fitted for another model version)."""

    taxonomy = models.OneToOneField(Taxonomy, on_delete=models.CASCADE, related_name="deployment")
    index_build = models.ForeignKey(IndexBuild, on_delete=models.PROTECT, related_name="+")
    ranker = models.ForeignKey(
        RankerVersion, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # When beat last queued a ranker fit that has not ended: one fit a taxonomy at a time.
    ranker_fit_queued_at = models.DateTimeField(null=True, blank=True)
    # The last first fit refused for too few judged texts with a group to fit on: the newest
    # verdict it saw, and how many texts were usable. Beat tries again only once a
    # newer verdict is stored, and the Models page says how many more are needed.
    ranker_refused_until = models.BigIntegerField(null=True, blank=True)
    ranker_refused_usable = models.PositiveIntegerField(null=True, blank=True)
    # The model version that fit was for: another model's candidates start afresh.
    ranker_refused_model_version_id = models.BigIntegerField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.taxonomy} → {self.index_build}"


class TrainingRun(models.Model):
    class Kind(models.TextChoices):
        BUILD = "build", "Fit a new model and index"
        REINDEX = "reindex", "Rebuild the index with the live model"
        FINETUNE = "finetune", "Fine-tune on feedback, gate, promote"
        ROLLBACK = "rollback", "Make an earlier version live again"

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        EVALUATED = "evaluated", "Evaluated"
        PROMOTED = "promoted", "Promoted"
        REJECTED = "rejected", "Rejected by the gate"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        # A queued reindex a fine-tune made redundant: the fine-tune indexes every member too.
        SUPERSEDED = "superseded", "Superseded by a later run"
        # Stopped by an admin before it changed anything live.
        CANCELLED = "cancelled", "Cancelled"

    ACTIVE_STATUSES = (Status.QUEUED, Status.RUNNING, Status.EVALUATED)

    class Trigger(models.TextChoices):
        MANUAL = "manual", "Manual"
        VERDICTS = "verdicts", "New verdicts"
        SCHEDULE = "schedule", "Schedule"
        IMPORT = "import", "Taxonomy import"

    taxonomy = models.ForeignKey(Taxonomy, on_delete=models.CASCADE, related_name="training_runs")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    trigger = models.CharField(max_length=16, choices=Trigger.choices, default=Trigger.MANUAL)
    stage = models.CharField(max_length=32, blank=True)
    progress = models.FloatField(default=0.0)
    eta_seconds = models.FloatField(null=True, blank=True)
    config = models.JSONField(default=dict, blank=True)
    activate = models.BooleanField(default=True, help_text="Make the result live when done")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    parent_version = models.ForeignKey(
        ModelVersion,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Fine-tune from this version instead of training from scratch",
    )
    # The version the run made (a fine-tune's candidate) or, for a rollback, the one it restores.
    model_version = models.ForeignKey(
        ModelVersion, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    index_build = models.ForeignKey(
        IndexBuild, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The last feedback pair a fine-tune trains on; verdicts given during the run wait for the next.
    feedback_until = models.BigIntegerField(null=True, blank=True)
    gate_report = models.JSONField(default=dict, blank=True)
    flip_report = models.JSONField(default=dict, blank=True)
    # What a build's, reindex's or rollback's time left was worked out from (the rates measured
    # at its start, the seconds counted per phase, the factors) and what each phase took: the
    # next run of its kind and spec is expected as much longer than counted. A fine-tune keeps
    # its own in its gate report.
    eta_report = models.JSONField(default=dict, blank=True)
    # Progress writes this; a running run whose heartbeat stops had its worker die.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # An admin asked a running run to stop: its next progress report stops it (RunCancelled).
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    retry_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="retries"
    )
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            # One run at a time per taxonomy: a second request while one is active is a no-op.
            models.UniqueConstraint(
                fields=["taxonomy"],
                condition=Q(status__in=["queued", "running", "evaluated"]),
                name="one_active_run_per_taxonomy",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} run {self.pk} of {self.taxonomy} ({self.status})"


class BulkJob(models.Model):
    """A file of texts normalized in the background into a result file, split into chunks
    (``BulkChunk``) that any number of workers normalize at once.

    The input is stored under the artifacts folder. Each chunk's results are written beside it
    under ``chunks/`` and count once the chunk is done; when the last is done they are joined in
    input order into ``.part`` files renamed to their final names, so a result on disk under its
    final name is whole. Every chunk is answered by the model version and index build pinned
    when the job started.
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    ACTIVE_STATUSES = (Status.QUEUED, Status.RUNNING)

    class Format(models.TextChoices):
        CSV = "csv", "CSV"
        TEXT = "txt", "Text, one per line"

    taxonomy = models.ForeignKey(Taxonomy, on_delete=models.CASCADE, related_name="bulk_jobs")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    filename = models.CharField(max_length=255)
    input_format = models.CharField(max_length=8, choices=Format.choices)
    column = models.CharField(max_length=200, blank=True, help_text="The CSV column to normalize")
    folder = models.CharField(max_length=500, help_text="Relative to the artifacts folder")
    input_bytes = models.BigIntegerField()
    # Rows whose top group's chance of being right (the card's probability) is below this, or
    # whose lead over the runner-up is below review_margin_below, also go to the review queue.
    review_below = models.FloatField(null=True, blank=True)
    review_margin_below = models.FloatField(null=True, blank=True)
    rows_queued = models.BigIntegerField(default=0, help_text="Rows sent to the review queue")
    # The taxonomy's auto-coding as the job started (None: off): its rows are coded against
    # this threshold whatever the policy becomes while it runs.
    auto_coding_threshold = models.FloatField(null=True, blank=True)
    auto_coding_version = models.PositiveIntegerField(null=True, blank=True)
    # The audit share of that policy: the job's coded rows are sampled for the audit with it.
    auto_coding_audit_share = models.FloatField(null=True, blank=True)
    rows_auto_coded = models.BigIntegerField(
        default=0, help_text="Rows whose answer reached the auto-coding threshold"
    )
    rows_not_queued = models.BigIntegerField(
        default=0, help_text="Rows that qualified for review past the job's cap, not sent"
    )
    # Pinned by the first chunk: every row is answered by this version and index.
    model_version = models.ForeignKey(
        ModelVersion, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    index_build = models.ForeignKey(
        IndexBuild, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Pinned with them: the ranker whose probabilities the auto-coding threshold was set for,
    # so a ranker fitted while the job runs does not move them (0: the starter; null: a job
    # pinned before this was kept, answered with the live ranker).
    ranker_pinned = models.BigIntegerField(null=True, blank=True)
    # Where the data rows start (past the header and a byte-order mark): the first chunk's.
    input_offset = models.BigIntegerField(default=0)
    input_line = models.BigIntegerField(default=1, help_text="The line input_offset starts")
    chunk_rows = models.PositiveIntegerField(
        null=True, blank=True, help_text="Rows a chunk, fixed when the split starts"
    )
    # Null while the file is being split; then how many chunks it was split into.
    chunks_total = models.PositiveIntegerField(null=True, blank=True)
    chunks_done = models.PositiveIntegerField(default=0, help_text="Chunks done, failed ones too")
    chunks_failed = models.PositiveIntegerField(
        default=0, help_text="Chunks given up after their worker died: their rows hold the error"
    )
    # Counted as each chunk is done, whichever worker did it.
    rows_done = models.BigIntegerField(default=0)
    rows_failed = models.BigIntegerField(default=0, help_text="Rows whose text could not be used")
    bytes_done = models.BigIntegerField(default=0, help_text="Input bytes of the chunks done")
    progress = models.FloatField(default=0.0)
    eta_seconds = models.FloatField(null=True, blank=True)
    # The time left is measured from here: when this run of the job started, and how far it was.
    eta_from = models.DateTimeField(null=True, blank=True)
    eta_bytes_from = models.BigIntegerField(default=0)
    attempts = models.PositiveIntegerField(
        default=0, help_text="Times the job was taken up to split or resume"
    )
    cancel_requested = models.BooleanField(default=False)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"bulk job {self.pk} of {self.taxonomy} ({self.status})"

    @property
    def active(self) -> bool:
        return self.status in self.ACTIVE_STATUSES


class BulkChunk(models.Model):
    """A run of consecutive rows of a bulk job's file (whole CSV records: a chunk never splits a
    quoted field), normalized by whichever worker claims it and retried alone.

    A claim is a conditional update (queued, or running with a stale heartbeat) that bumps
    ``attempts``; a worker's results count only while the chunk's attempts are still its own.
    Taking back a running chunk whose heartbeat stopped counts a death: after
    ``bulk.run.CHUNK_DEATHS`` its rows are written with the reason in ``error`` instead.
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"  # given up: its rows are in the results with the error

    FINISHED_STATUSES = (Status.DONE, Status.FAILED)

    job = models.ForeignKey(BulkJob, on_delete=models.CASCADE, related_name="chunks")
    index = models.PositiveIntegerField(help_text="Its place in the file, from 0")
    offset = models.BigIntegerField(help_text="The byte its first record starts at")
    end_offset = models.BigIntegerField(help_text="The byte just past its last record")
    line = models.BigIntegerField(help_text="The line its first record starts on")
    next_line = models.BigIntegerField(help_text="The line the next chunk starts on")
    rows = models.PositiveIntegerField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    attempts = models.PositiveIntegerField(default=0)
    deaths = models.PositiveIntegerField(
        default=0, help_text="Times it was taken back from a worker that went silent"
    )
    worker = models.CharField(max_length=255, blank=True, help_text="Who claimed it last")
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["job", "index"]
        constraints = [
            models.UniqueConstraint(fields=["job", "index"], name="bulk_chunk_unique_index")
        ]
        indexes = [models.Index(fields=["status", "heartbeat_at"], name="bulk_chunk_stale")]

    def __str__(self) -> str:
        return f"chunk {self.index} of bulk job {self.job_id} ({self.status})"
