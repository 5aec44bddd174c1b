"""Siamweb settings, read from the environment.

With no variables set this is the embedded default: a SQLite file, a Celery broker on the local
filesystem (no server), artifacts under ``var/``. Production sets ``SIAMWEB_ENV=production`` and
real values; see README.md for the full list.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

import siamweb.task_names as task_names
from siamweb.env import env_bool, env_float, env_int, env_list, env_path, env_rate, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = env_path("SIAMWEB_VAR_DIR", default=BASE_DIR / "var")

SIAMWEB_ENV = env_str("SIAMWEB_ENV", "development")
if SIAMWEB_ENV not in {"development", "production"}:
    raise ImproperlyConfigured(
        f"SIAMWEB_ENV must be 'development' or 'production', got {SIAMWEB_ENV!r}"
    )
PRODUCTION = SIAMWEB_ENV == "production"

_DEV_SECRET_KEY = "siamweb-development-only-not-a-secret"
SECRET_KEY = env_str("SECRET_KEY", "" if PRODUCTION else _DEV_SECRET_KEY)
if PRODUCTION and (len(SECRET_KEY) < 32 or SECRET_KEY == _DEV_SECRET_KEY):
    raise ImproperlyConfigured(
        "SECRET_KEY must be set to a random value of at least 32 characters in production"
    )

DEBUG = env_bool("DEBUG", default=False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "axes",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "annotations",
    "models_app",
    "worker",
]

MIDDLEWARE = [
    # Outermost, so every answer gets the policy: static files, bodies refused unread, errors.
    "siamweb.middleware.ContentSecurityPolicyMiddleware",
    # Before anything reads the client's address or scheme: only the proxy's are believed.
    "siamweb.middleware.ForwardedHeadersMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Before anything reads the body: a body longer than its address takes is refused unread.
    "siamweb.middleware.RequestSizeLimitMiddleware",
    # A NUL in an address is bad input, before any view looks a segment of it up.
    "siamweb.middleware.NulCharacterMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "siamweb.middleware.MethodNotAllowedPageMiddleware",
    "siamweb.middleware.PrivateWhenSignedInMiddleware",
    # A sign-in refused by django-axes' backend answers the lockout page (429).
    "axes.middleware.AxesMiddleware",
    # Innermost, so it sees what a view raised: a locked or lost database answers 503.
    "siamweb.middleware.TransientDatabaseErrorMiddleware",
]

ROOT_URLCONF = "siamweb.urls"
WSGI_APPLICATION = "siamweb.wsgi.application"
ASGI_APPLICATION = "siamweb.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
            "libraries": {"siamweb": "siamweb.web.template_filters"},
        },
    },
]


# The web server and the worker write to one SQLite file: wait for locks instead of failing,
# take the write lock at a transaction's start (no "database is locked" on a lock upgrade),
# and let readers run beside a writer.
SQLITE_OPTIONS = {
    "timeout": 30,
    "transaction_mode": "IMMEDIATE",
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
}


def _database_from_env() -> dict:
    url = env_str("DATABASE_URL")
    if not url:
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": VAR_DIR / "siamweb.sqlite3",
            "OPTIONS": dict(SQLITE_OPTIONS),
        }
    try:
        config = dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True)
    except ValueError as exc:
        raise ImproperlyConfigured(f"DATABASE_URL is malformed: {exc}") from None
    if not config.get("ENGINE") or not config.get("NAME"):
        raise ImproperlyConfigured(f"DATABASE_URL is malformed: no engine or database in {url!r}")
    if config["ENGINE"] == "django.db.backends.postgresql":
        # A query run through ``plain_sql.prepared_rows`` is prepared on its first run; the ORM's
        # cursors bind on the client and are never prepared. Behind a pooler in transaction
        # mode that needs PgBouncer 1.22 or newer with max_prepared_statements set, or this off.
        prepared = env_bool("SIAMWEB_DB_PREPARED_STATEMENTS", default=True)
        options = {"prepare_threshold": 0 if prepared else None}
        # No JIT compilation: the batch groups page's count was estimated dear enough to be
        # compiled, 237 of its 316 ms, for a query that runs in 80. A pooler must pass (or
        # ignore) the ``options`` startup parameter.
        options["options"] = "-c jit=off"
        config["OPTIONS"] = {**options, **config.get("OPTIONS", {})}
    if config["ENGINE"] == "django.db.backends.sqlite3":
        # A file named by URL is shared by the web server and the worker just the same.
        config["OPTIONS"] = {**SQLITE_OPTIONS, **config.get("OPTIONS", {})}
        config["CONN_MAX_AGE"] = 0  # a connection a thread, closed after each request
        # The tests' database a file beside it, as the product's is: an in-memory one shared
        # by the live server's threads locks whole tables and refuses writers at once, where a
        # file in WAL mode makes them wait their turn (SQLITE_OPTIONS).
        config["TEST"] = {"NAME": f"{config['NAME']}.test"}
    return config


DATABASES = {"default": _database_from_env()}


def _cache_from_env() -> dict:
    url = env_str("SIAMWEB_CACHE_URL")
    if not url:
        # Per process: each gunicorn worker then counts the throttles (bad tokens, the token
        # endpoints) on its own. Production shares one Redis (docs/deploying.md).
        return {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    if url.split("://", 1)[0] not in {"redis", "rediss", "unix"}:
        raise ImproperlyConfigured(
            f"SIAMWEB_CACHE_URL must start with redis://, rediss:// or unix://, got {url!r}"
        )
    return {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url}


CACHES = {"default": _cache_from_env()}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "review"
LOGOUT_REDIRECT_URL = "login"

# Sign-ins (this site's and the admin's) are counted by django-axes in the database: after
# SIAMWEB_LOGIN_FAILURE_LIMIT failures for one username from one address, that pair is refused
# for SIAMWEB_LOGIN_LOCKOUT_MINUTES after its last attempt (an admin unlocks it sooner by
# deleting its access attempt in the Django admin, or `manage.py axes_reset_username`); after
# SIAMWEB_LOGIN_ADDRESS_FAILURE_LIMIT failures from one address, whatever the usernames, the
# address is. A browser that signed in as the username before keeps its own count instead
# (siamweb.sign_in), so a stranger on a shared address cannot lock a user out of it.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
SIAMWEB_LOGIN_FAILURE_LIMIT = env_int("SIAMWEB_LOGIN_FAILURE_LIMIT", default=5, minimum=1)
SIAMWEB_LOGIN_LOCKOUT_MINUTES = env_int("SIAMWEB_LOGIN_LOCKOUT_MINUTES", default=15, minimum=1)
SIAMWEB_LOGIN_ADDRESS_FAILURE_LIMIT = env_int(
    "SIAMWEB_LOGIN_ADDRESS_FAILURE_LIMIT", default=10, minimum=1
)
AXES_HANDLER = "siamweb.sign_in.SignInLimits"
AXES_FAILURE_LIMIT = SIAMWEB_LOGIN_FAILURE_LIMIT
AXES_COOLOFF_TIME = timedelta(minutes=SIAMWEB_LOGIN_LOCKOUT_MINUTES)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True  # a successful sign-in forgets the pair's earlier failures
AXES_VERBOSE = False  # no banner on every start; failures and lockouts are still logged
AXES_LOCKOUT_CALLABLE = "annotations.views.account.login_locked_out"
# The client's address as DRF's throttles read it (SIAMWEB_PROXY_COUNT below).
AXES_CLIENT_IP_CALLABLE = "siamweb.authentication.client_address"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise warns on every request otherwise
WHITENOISE_USE_FINDERS = not PRODUCTION

SESSION_COOKIE_SECURE = PRODUCTION
CSRF_COOKIE_SECURE = PRODUCTION
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
# Scripts, styles, fonts and fetches from this site's own files only, nothing inline, never
# framed: markup that slips into a page cannot run (siamweb.middleware).
_STRICT_CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'self'; "
    "form-action 'self'; frame-ancestors 'none'"
)
# One line whatever the variable held: a header value cannot hold a line break.
SIAMWEB_CONTENT_SECURITY_POLICY = " ".join(
    env_str("SIAMWEB_CONTENT_SECURITY_POLICY", _STRICT_CONTENT_SECURITY_POLICY).split()
)
if not SIAMWEB_CONTENT_SECURITY_POLICY:
    raise ImproperlyConfigured(
        "SIAMWEB_CONTENT_SECURITY_POLICY must be a Content-Security-Policy, got an empty value"
    )
# Production runs behind a proxy that terminates TLS and says so in X-Forwarded-Proto
# (docs/deploying.md): plain HTTP is redirected, and browsers are told to stay on HTTPS.
if PRODUCTION:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", default=PRODUCTION)
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]  # a load balancer's probe may come over plain HTTP
SECURE_HSTS_SECONDS = env_int(
    "SECURE_HSTS_SECONDS", default=365 * 24 * 3600 if PRODUCTION else 0, minimum=0
)
# Subdomains and the browsers' preload list reach beyond this site: the deployer opts in.
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", default=False)
# check --deploy asks for both; they are the deployer's choice above, not an oversight.
SILENCED_SYSTEM_CHECKS = ["security.W005", "security.W021"]

# Proxies in front of the web server that append the client's address to X-Forwarded-For (1
# behind nginx, docs/deploying.md); 0 reads the connection's own address. The login lockout and
# the API's throttles both count per client address read this way.
SIAMWEB_PROXY_COUNT = env_int("SIAMWEB_PROXY_COUNT", default=0, minimum=0)
# The proxy proves it is the proxy with this secret (nginx sends it in X-Siamweb-Proxy-Secret):
# X-Forwarded-For and -Proto are believed on requests that carry it and dropped from any other
# (siamweb.middleware.ForwardedHeadersMiddleware). Production, always behind one, requires it.
SIAMWEB_PROXY_SECRET = env_str("SIAMWEB_PROXY_SECRET", "")
if PRODUCTION and len(SIAMWEB_PROXY_SECRET) < 32:
    raise ImproperlyConfigured(
        "SIAMWEB_PROXY_SECRET must be set to a random value of at least 32 characters in "
        "production, and nginx must send it (docs/deploying.md): forwarded headers are believed "
        "only from requests that carry it"
    )
# Invalid API tokens one client address may send (siamweb.authentication); past it, its invalid
# tokens are answered 429 until the window has passed. A valid token is never counted nor held up.
SIAMWEB_BAD_TOKEN_RATE = env_rate("SIAMWEB_BAD_TOKEN_RATE", default="20/min")
# Calls a user makes to their own token's endpoints (/api/v1/account/token…).
SIAMWEB_TOKEN_API_RATE = env_rate("SIAMWEB_TOKEN_API_RATE", default="30/hour")
# An API token older than this is refused (401, saying so); 0: tokens never expire.
# At most a century: a token's expiry date must stay a date (past year 9999, every page and
# token-authenticated call reading it would fail).
SIAMWEB_API_TOKEN_MAX_AGE_DAYS = env_int(
    "SIAMWEB_API_TOKEN_MAX_AGE_DAYS", default=90, minimum=0, maximum=36_500
)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "siamweb.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": [
        "siamweb.parsers.SafeJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "UNAUTHENTICATED_USER": None,
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "NUM_PROXIES": SIAMWEB_PROXY_COUNT,
    "DEFAULT_THROTTLE_RATES": {
        "bad_token": SIAMWEB_BAD_TOKEN_RATE,
        "token": SIAMWEB_TOKEN_API_RATE,
    },
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Siamweb API",
    "DESCRIPTION": "Normalize short texts against a taxonomy, review predictions, curate groups.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI from the sidecar package's static files: no CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# --- Siamweb -------------------------------------------------------------------------------------
SIAMWEB_ARTIFACTS_DIR = env_path("SIAMWEB_ARTIFACTS_DIR", default=VAR_DIR / "artifacts")
# At most what a row stores (annotations.text_rule.STORED_TEXT_LENGTH).
SIAMWEB_MAX_TEXT_LENGTH = env_int("SIAMWEB_MAX_TEXT_LENGTH", default=200, minimum=10, maximum=500)
SIAMWEB_MAX_TEXTS_PER_REQUEST = env_int("SIAMWEB_MAX_TEXTS_PER_REQUEST", default=1000, minimum=1)
SIAMWEB_DEFAULT_K = env_int("SIAMWEB_DEFAULT_K", default=5, minimum=1)
SIAMWEB_MAX_K = env_int("SIAMWEB_MAX_K", default=50, minimum=1)
if SIAMWEB_DEFAULT_K > SIAMWEB_MAX_K:
    # A request that names no k would get more groups than one that asks for the most.
    raise ImproperlyConfigured(
        f"SIAMWEB_DEFAULT_K ({SIAMWEB_DEFAULT_K}) must be at most SIAMWEB_MAX_K ({SIAMWEB_MAX_K})"
    )
# Nearest members fetched per requested group: several members of one group crowd the top hits.
SIAMWEB_MEMBERS_PER_GROUP = env_int("SIAMWEB_MEMBERS_PER_GROUP", default=8, minimum=1)
# Nearest members the ranker reads a text at least: its candidates are the best groups of these.
SIAMWEB_RANKER_DEPTH = env_int("SIAMWEB_RANKER_DEPTH", default=100, minimum=1)
# The ranker is fitted again once this many final verdicts are new to the live one (beat looks
# every SIAMWEB_RANKER_CHECK_SECONDS), and after every model that goes live.
SIAMWEB_RANKER_REFIT_VERDICTS = env_int("SIAMWEB_RANKER_REFIT_VERDICTS", default=20, minimum=1)
SIAMWEB_RANKER_CHECK_SECONDS = env_int("SIAMWEB_RANKER_CHECK_SECONDS", default=5, minimum=1)
# Open review items ordered again after each new live ranker, at most this many a time (the
# head of the queue and those ordered longest ago): a bounded cost for a queue of any length.
SIAMWEB_REORDER_MAX_ITEMS = env_int("SIAMWEB_REORDER_MAX_ITEMS", default=20_000, minimum=1)
# A fit queued longer ago than this without ending (its worker died) no longer holds back the next.
SIAMWEB_RANKER_FIT_STALE_SECONDS = env_int(
    "SIAMWEB_RANKER_FIT_STALE_SECONDS", default=900, minimum=10
)
# An upload of raw inputs is stored within one request (about 7 queries a row), so it is bounded.
SIAMWEB_UPLOAD_MAX_BYTES = env_int(
    "SIAMWEB_UPLOAD_MAX_BYTES", default=2 * 1024 * 1024, minimum=1024
)
SIAMWEB_UPLOAD_MAX_ROWS = env_int("SIAMWEB_UPLOAD_MAX_ROWS", default=2000, minimum=1)
# A bulk job's file streams to disk and is read in chunks by a worker: bounded by disk, not memory.
SIAMWEB_BULK_MAX_BYTES = env_int("SIAMWEB_BULK_MAX_BYTES", default=1024**3, minimum=1024)
SIAMWEB_BULK_CHUNK_ROWS = env_int("SIAMWEB_BULK_CHUNK_ROWS", default=2000, minimum=1)
# At most this many rows of one bulk job go to the review queue (a 1 GiB file could queue
# millions); the rest that qualified are counted on the job.
SIAMWEB_BULK_REVIEW_MAX_ROWS = env_int("SIAMWEB_BULK_REVIEW_MAX_ROWS", default=2000, minimum=0)
# Review items one user's sends (API, uploads, the playground, bulk jobs) may have waiting at
# once: a send past it is refused saying so, a bulk job's rows past it are counted, not queued.
SIAMWEB_REVIEW_PENDING_PER_USER = env_int(
    "SIAMWEB_REVIEW_PENDING_PER_USER", default=2000, minimum=0
)
# A running bulk job silent this long has lost its worker: another delivery may take it over.
SIAMWEB_BULK_STALE_SECONDS = env_int("SIAMWEB_BULK_STALE_SECONDS", default=120, minimum=1)
# A finished bulk job, its upload and its results are deleted this many days after it ended: an
# upload (a CRM export) often holds more than titles. 0 keeps them until deleted by hand.
SIAMWEB_BULK_KEEP_DAYS = env_int("SIAMWEB_BULK_KEEP_DAYS", default=30, minimum=0)
# How long a curator holds a review card before another curator may get it.
SIAMWEB_REVIEW_LEASE_SECONDS = env_int("SIAMWEB_REVIEW_LEASE_SECONDS", default=300, minimum=10)
# Share of items shown to a second curator, to measure agreement (0 turns it off).
SIAMWEB_DOUBLE_REVIEW_PERCENT = env_int(
    "SIAMWEB_DOUBLE_REVIEW_PERCENT", default=5, minimum=0, maximum=100
)
# Verdicts a day the review page's progress bar counts towards, per curator.
SIAMWEB_DAILY_GOAL = env_int("SIAMWEB_DAILY_GOAL", default=100, minimum=1)

# A new taxonomy serves with the pretrained tower as it comes at once; then, unless this is off,
# its first training run trains the tower on its strings (up to an hour on 2 CPU cores).
SIAMWEB_TRAIN_NEW_TAXONOMIES = env_bool("SIAMWEB_TRAIN_NEW_TAXONOMIES", default=True)

# Retraining: when beat starts a fine-tune, how long it trains, and what the gate tolerates.
SIAMWEB_RETRAIN_MIN_VERDICTS = env_int("SIAMWEB_RETRAIN_MIN_VERDICTS", default=50, minimum=1)
SIAMWEB_RETRAIN_MAX_AGE_HOURS = env_int("SIAMWEB_RETRAIN_MAX_AGE_HOURS", default=24, minimum=1)
SIAMWEB_RETRAIN_CHECK_SECONDS = env_int("SIAMWEB_RETRAIN_CHECK_SECONDS", default=300, minimum=5)
SIAMWEB_FINETUNE_MAX_MINUTES = env_float("SIAMWEB_FINETUNE_MAX_MINUTES", default=3.0, minimum=0.01)
# The budget above is for this many new verdicts; a run with more (the verdicts of two rounds
# after a rejection, say) trains proportionally longer, up to FINETUNE_BUDGET_GROWTH_CAP times
# (models_app/training/finetune_recipe.py).
SIAMWEB_FINETUNE_BUDGET_VERDICTS = env_int(
    "SIAMWEB_FINETUNE_BUDGET_VERDICTS", default=500, minimum=1
)
SIAMWEB_GATE_SUITE_SIZE = env_int("SIAMWEB_GATE_SUITE_SIZE", default=1000, minimum=10)
# The gate blocks a candidate only where it is significantly worse than the live version (or the
# version its chain of promotions started from) on the same cases: McNemar's exact test, this
# significance level shared over every row tested (models_app/training/gate.py).
SIAMWEB_GATE_ALPHA = env_float("SIAMWEB_GATE_ALPHA", default=0.05, minimum=1e-9)
if SIAMWEB_GATE_ALPHA >= 0.5:
    raise ImproperlyConfigured(
        f"SIAMWEB_GATE_ALPHA must be below 0.5, got {SIAMWEB_GATE_ALPHA}: at 0.5 or more the gate "
        "would block candidates that are as likely better as worse"
    )
# Real traffic in the gate (models_app/training/gate.py, Comparison.answers_moved): an unjudged
# answer the
# live ranker holds at this probability or more, moved by a candidate to a group no curator has
# put a text in, is counted as lost with that probability; more expected losses than this many per
# thousand inputs compared blocks the candidate.
SIAMWEB_GATE_CONFIDENT_PROBABILITY = env_float(
    "SIAMWEB_GATE_CONFIDENT_PROBABILITY", default=0.9, minimum=0.5
)
if SIAMWEB_GATE_CONFIDENT_PROBABILITY > 1.0:
    raise ImproperlyConfigured(
        "SIAMWEB_GATE_CONFIDENT_PROBABILITY is a probability: at most 1, got "
        f"{SIAMWEB_GATE_CONFIDENT_PROBABILITY}"
    )
# 5: on the real stream (docs/benchmarks.md) 1 rejected the first round's fine-tune for 2
# confident moves of 1,891 inputs, where at 5 it went live and lifted never-judged titles 6.6
# points; 5 still rejects one that moved 23 of 2,390. The flagship break in the 148-input demo,
# one confident move, blocks at either.
SIAMWEB_GATE_MOVED_PER_THOUSAND = env_float(
    "SIAMWEB_GATE_MOVED_PER_THOUSAND", default=5.0, minimum=0.0
)
# A running training writes a heartbeat with its progress; silent this long, its worker died.
SIAMWEB_RUN_HEARTBEAT_TIMEOUT_SECONDS = env_int(
    "SIAMWEB_RUN_HEARTBEAT_TIMEOUT_SECONDS", default=600, minimum=30
)

# --- Celery --------------------------------------------------------------------------------------
# Without CELERY_BROKER_URL the broker is a folder on disk: no server needed on a bare machine.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://")
if CELERY_BROKER_URL.split("://", 1)[0] not in {"filesystem", "redis", "rediss", "amqp", "memory"}:
    raise ImproperlyConfigured(
        "CELERY_BROKER_URL must start with filesystem://, redis://, rediss:// or amqp://, "
        f"got {CELERY_BROKER_URL!r}"
    )
if CELERY_BROKER_URL == "filesystem://":
    _broker_dir = VAR_DIR / "broker"
    # kombu's filesystem transport needs its folders before the first message is sent.
    # "control" holds the exchanges' bindings; kombu's default is ./control in the working folder.
    for _folder in ("queue", "processed", "control"):
        (_broker_dir / _folder).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
    }
else:
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 4 * 3600}
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", default=3600, minimum=1)
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", default=3900, minimum=1)
if CELERY_TASK_SOFT_TIME_LIMIT > CELERY_TASK_TIME_LIMIT:
    # Celery refuses to send any task so set: every .delay() and beat's every check would fail.
    raise ImproperlyConfigured(
        f"CELERY_TASK_SOFT_TIME_LIMIT ({CELERY_TASK_SOFT_TIME_LIMIT} s) must be at most "
        f"CELERY_TASK_TIME_LIMIT ({CELERY_TASK_TIME_LIMIT} s): raise both"
    )
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", default=False)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Training goes to its own queue so GPU hosts can take it and nothing else waits behind it;
# ranker fits to theirs, so a refit never waits behind a bulk job either. A run that only
# encodes (reindex, rollback, the pretrained tower as it comes) is sent to the fast queue by
# ``training_run_enqueue``. Everything else is fast work.
CELERY_TASK_DEFAULT_QUEUE = task_names.FAST_QUEUE
CELERY_TASK_ROUTES = {
    task_names.EXECUTE_TRAINING_RUN: {"queue": task_names.TRAINING_QUEUE},
    task_names.FINISH_PROMOTION: {"queue": task_names.TRAINING_QUEUE},
    task_names.FIT_RANKER: {"queue": task_names.RANKER_QUEUE},
    task_names.REFIT_DUE_RANKERS: {"queue": task_names.RANKER_QUEUE},
}
SIAMWEB_REINDEX_CHECK_SECONDS = env_int("SIAMWEB_REINDEX_CHECK_SECONDS", default=300, minimum=5)
# Each check's message expires after its own interval: the next one is on its way by then.
# Without, the checks queued while their worker was down or busy ran back to back after.
CELERY_BEAT_SCHEDULE = {
    name: {"task": task, "schedule": float(seconds), "options": {"expires": float(seconds)}}
    for name, task, seconds in (
        (
            "reindex-taxonomies-with-new-members",
            task_names.REINDEX_STALE_TAXONOMIES,
            SIAMWEB_REINDEX_CHECK_SECONDS,
        ),
        (
            "retrain-taxonomies-with-new-verdicts",
            task_names.RETRAIN_DUE_TAXONOMIES,
            SIAMWEB_RETRAIN_CHECK_SECONDS,
        ),
        (
            "resume-bulk-jobs-of-dead-workers",
            task_names.RESUME_STALE_BULK_JOBS,
            SIAMWEB_BULK_STALE_SECONDS,
        ),
        (
            "refit-rankers-with-new-verdicts",
            task_names.REFIT_DUE_RANKERS,
            SIAMWEB_RANKER_CHECK_SECONDS,
        ),
        ("delete-bulk-jobs-past-their-keep", task_names.DELETE_EXPIRED_BULK_JOBS, 3600),
    )
}
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")

LOG_LEVEL = env_str("LOG_LEVEL", "INFO").upper()
if LOG_LEVEL not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
    raise ImproperlyConfigured(
        f"LOG_LEVEL must be DEBUG, INFO, WARNING or ERROR, got {LOG_LEVEL!r}"
    )

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "filters": {"refusal_without_traceback": {"()": "siamweb.log_filters.RefusalWithoutTraceback"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    # faiss announces which CPU build it loaded on every start; django-axes logs every sign-in
    # (its failures and lockouts are warnings, and stay). A 403 is one line, not a traceback.
    "loggers": {
        "faiss.loader": {"level": "WARNING"},
        "axes": {"level": "WARNING"},
        "django.request": {"filters": ["refusal_without_traceback"]},
    },
}
