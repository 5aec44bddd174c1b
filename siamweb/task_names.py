"""The name of every Celery task, written once: the tasks register under these, and the modules
that queue one by name (so as not to import the worker layer above them), the task routes and
beat's schedule all read them from here. So are the queues they go to."""

EXECUTE_TRAINING_RUN = "worker.tasks.execute_training_run"
REPREDICT_PENDING_INPUTS = "worker.tasks.repredict_pending_inputs"
FIT_RANKER = "worker.tasks.fit_ranker"
REFIT_DUE_RANKERS = "worker.tasks.refit_due_rankers"
REORDER_REVIEW_QUEUE = "worker.tasks.reorder_review_queue"
FINISH_PROMOTION = "worker.tasks.finish_promotion"
REINDEX_STALE_TAXONOMIES = "worker.tasks.reindex_stale_taxonomies"
RETRAIN_DUE_TAXONOMIES = "worker.tasks.retrain_due_taxonomies"
EXECUTE_BULK_JOB = "worker.tasks.execute_bulk_job"
EXECUTE_BULK_CHUNK = "worker.tasks.execute_bulk_chunk"
FINISH_BULK_JOB = "worker.tasks.finish_bulk_job"
RESUME_STALE_BULK_JOBS = "worker.tasks.resume_stale_bulk_jobs"
DELETE_EXPIRED_BULK_JOBS = "worker.tasks.delete_expired_bulk_jobs"
COMPILE_MODEL_VERSION = "worker.tasks.compile_model_version"

# Three queues, so that nothing a curator waits for sits behind training (docs/deploying.md):
# ``fast`` (the default: bulk jobs, reindexes, re-predictions, beat's checks), ``ranker``
# (ranker fits, seconds each, on a worker of their own so a refit is live within seconds
# whatever else runs) and ``training`` (fine-tunes and trained builds: minutes to hours, GPU
# hosts where there are some).
FAST_QUEUE = "fast"
RANKER_QUEUE = "ranker"
TRAINING_QUEUE = "training"
QUEUES = (FAST_QUEUE, RANKER_QUEUE, TRAINING_QUEUE)
