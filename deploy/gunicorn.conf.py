"""gunicorn settings for the web processes, as docs/deploying.md runs them:

    gunicorn -c deploy/gunicorn.conf.py siamweb.wsgi --workers 4 --threads 2

The master loads the application and every taxonomy's live model and index before it forks, so
the workers share those pages copy-on-write instead of each holding a copy: a worker more costs
its own Python heap, not another model (bench/web_memory.py measures it). A model promoted later
is shared too: its big arrays are memory-mapped files (models_app/serving/engines.py). Workers,
threads and the address stay command-line options (or GUNICORN_CMD_ARGS).
"""

from __future__ import annotations

import gc
from pathlib import Path

# The checkout this file is in, whatever directory gunicorn was started from: ``siamweb.wsgi``
# and the settings' relative paths resolve against it.
chdir = str(Path(__file__).resolve().parent.parent)
preload_app = True
worker_class = "gthread"
# The scheme and the client's address are Django's to read (SECURE_PROXY_SSL_HEADER, the
# throttles), from nginx only: it proves itself with SIAMWEB_PROXY_SECRET
# (siamweb.middleware.ForwardedHeadersMiddleware). gunicorn would take X-Forwarded-Proto from any
# process on loopback, where nginx and everything else on the host connect from alike.
forwarded_allow_ips = ""
secure_scheme_headers: dict[str, str] = {}
# nginx decides what is too long, and answers in the product's form: a request line or a header
# must fit one of its 8 KiB buffers (large_client_header_buffers). gunicorn's own limits sit at
# their maxima, so it never refuses first with its stock HTML page (its defaults, a 4,094-byte
# line and 100 headers, refused what nginx let through).
limit_request_line = 8190
limit_request_fields = 32768
limit_request_field_size = 8190

_torch_threads: int | None = None


def pre_fork(server, worker) -> None:
    """Before each worker is forked: bring the master's engines up to the live deployment, so a
    worker started after a promotion (a crash, ``kill -HUP``, ``--max-requests``) shares the
    model it will serve. One indexed query per taxonomy when nothing moved."""
    global _torch_threads
    import torch
    from django.db import DatabaseError, connections

    from models_app.serving.engines import preload_live_engines

    if _torch_threads is None:
        _torch_threads = torch.get_num_threads()
        # One thread while loading: PyTorch's OpenMP pool, once started in the master, is not
        # safe to use in a forked child; with one thread it is never started here.
        torch.set_num_threads(1)
    try:
        for slug, model in preload_live_engines().items():
            server.log.info("preloaded %s: %s", slug, model)
    except DatabaseError as exc:
        # The server starts all the same: each worker loads its engine on its first request,
        # and answers 503 while the database is away (siamweb.middleware).
        server.log.warning("live engines not preloaded, the database did not answer: %s", exc)
    connections.close_all()  # each worker opens its own; a socket must not be shared
    # Objects that exist now are never scanned by the collector again, so its bookkeeping
    # writes do not copy the pages every worker shares.
    gc.freeze()


def post_fork(server, worker) -> None:
    import torch

    if _torch_threads is not None:
        torch.set_num_threads(_torch_threads)
