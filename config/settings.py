"""KV Planner settings: one module, every deployment knob read from the environment.

Local development: ``python3 dev.py run`` writes ``local.env`` once (``DEBUG=true`` and a
generated ``SECRET_KEY``); this module fills in what the environment does not set from it, so
``manage.py`` works in any shell. ``KVP_ENV_FILE`` names another file ("" for none: the tests).
Production images never contain it (``.dockerignore``) and still refuse to start without a secret.

Variables: ``SECRET_KEY``, ``DEBUG``, ``ALLOWED_HOSTS``, ``DATABASE_URL`` (default:
SQLite in ``var/``), ``REDIS_URL`` (Celery broker and result store; default: an
embedded filesystem broker in ``var/broker`` that needs no server),
``CSRF_TRUSTED_ORIGINS``, ``SECURE_SSL_REDIRECT``, ``KVP_DATA_DIR``.
"""

from __future__ import annotations

from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from .env import env_bool, env_float, env_int, env_list, env_str, load_env_file

BASE_DIR = Path(__file__).resolve().parent.parent
LOCAL_ENV_FILE = env_str("KVP_ENV_FILE", str(BASE_DIR / "local.env"))
if LOCAL_ENV_FILE:
    load_env_file(Path(LOCAL_ENV_FILE))
DATA_DIR = Path(env_str("KVP_DATA_DIR", str(BASE_DIR / "var")))
DATA_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env_bool("DEBUG", False)
_DEV_SECRET = "dev-only-insecure-secret-key-change-me-0123456789abcdefghijklmnopqrstuvwxyz"
SECRET_KEY = env_str("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY must be set when DEBUG is off (for local development, run "
            "'python3 dev.py run' once: it writes local.env with DEBUG=true and a generated key)"
        )
    SECRET_KEY = _DEV_SECRET
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost"] if DEBUG else [])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI's JavaScript and CSS, served locally (no CDN)
    "gpuprofiles",
    "planner",
    "accounts",  # sign-up, named API tokens and their authentication (accounts.authentication)
    "planner.calibration",  # app label "calibration": clock coefficients fitted on a user's measurements
]

# GZip for HTML and JSON (a 52.7 KB sizing page travels as about 9 KB). It sits after WhiteNoise, which answers
# static files itself (pre-compressed at collectstatic, immutable-cached) before this runs. BREACH, the attack
# on compressed pages that reflect input beside a secret, is covered: Django masks the CSRF token anew in every
# response and pads every gzip body with random bytes (Django 4.2+); the one secret a page shows, a new API
# token, is new on each response that carries it and is sent no-store; session ids travel in cookies only.
# docs/operations.md, "Compression".
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "config.shedding.LoadSheddingMiddleware",  # before the rest: a 503 past KVP_SHED_WAIT_S of queue costs little
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.middleware.gzip.GZipMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "config.throttling.PageThrottleMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

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
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL", f"sqlite:///{DATA_DIR / 'db.sqlite3'}"),
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 60),
    )
}
# A persistent connection is checked before each request reuses it: after PostgreSQL terminated the app's
# connections, each gunicorn worker answered one 500 on its dead connection (issue 37); now it reconnects.
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    # Web, worker and tests write the same file: IMMEDIATE transactions take the write lock up front,
    # so two writers queue (up to the timeout) instead of one failing at once with "database is
    # locked" when it upgrades a read lock inside a transaction.
    DATABASES["default"].setdefault("OPTIONS", {}).update(timeout=20, transaction_mode="IMMEDIATE")
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Database sessions that refuse malformed cookie values (NUL bytes were a 500 on PostgreSQL).
SESSION_ENGINE = "accounts.sessions"
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "home"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
try:  # collectstatic fills it; WhiteNoise warns "No directory at ..." on every start while it is missing
    STATIC_ROOT.mkdir(exist_ok=True)
except OSError:  # a read-only checkout: the finders serve the files all the same
    pass
# Plotly's JavaScript is served from here too (static/vendor/plotly: its cartesian bundle, no CDN).
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        # Compressed and hashed after collectstatic; plain names without it (config/static_storage.py).
        "BACKEND": "config.static_storage.CompressedManifestStorage",
    },
}
WHITENOISE_USE_FINDERS = True

# Request size limits: uploads of config.json and traces are small; refuse the absurd.
DATA_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024  # bytes
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024  # bytes
DATA_UPLOAD_MAX_NUMBER_FIELDS = 2000

# Security (production values; ``manage.py check --deploy`` is clean with DEBUG off).
SESSION_COOKIE_SECURE = not DEBUG and env_bool("SECURE_COOKIES", True)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", not DEBUG)
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]  # container health checks speak plain HTTP
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if DEBUG else 31_536_000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = not DEBUG
SECURE_HSTS_PRELOAD = not DEBUG
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"

# One cache shared by every process (throttle counters, failed logins): Redis when REDIS_URL is set,
# else a file cache in the data directory (shared by the processes of one host).
NUM_PROXIES = env_int("NUM_PROXIES", 0)
if env_str("REDIS_URL", ""):
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                          "LOCATION": env_str("CACHE_URL", env_str("REDIS_URL", "")),
                          "KEY_PREFIX": env_str("KVP_CACHE_KEY_PREFIX", "kvp")}}
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
                          "LOCATION": env_str("KVP_CACHE_DIR", str(DATA_DIR / "cache")),
                          "OPTIONS": {"MAX_ENTRIES": 20_000}}}
# Pages (HTML) per client IP or user, and failed sign-ins per IP and per user name.
THROTTLE_PAGES = env_str("THROTTLE_PAGES", "300/min")
THROTTLE_HEAVY_PAGES = env_str("THROTTLE_HEAVY_PAGES", "20/min")  # /replicas/, calibration uploads (simulate)
LOGIN_FAILURES = env_str("LOGIN_FAILURES", "10/h")  # per client IP and user name together
LOGIN_FAILURES_PER_IP = env_str("LOGIN_FAILURES_PER_IP", "100/h")  # per client IP, all user names
# Sign-up: accounts created per client IP (each account has its own quotas), and a switch to close it
# (then accounts are made by an administrator: manage.py createsuperuser, issue_token --create-user, the admin).
THROTTLE_SIGNUPS = env_str("THROTTLE_SIGNUPS", "5/h")
SIGNUP_OPEN = env_bool("SIGNUP_OPEN", True)

# Celery: Redis when REDIS_URL is set, otherwise an embedded filesystem broker.
REDIS_URL = env_str("REDIS_URL", "")
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    # Longer than the longest chunk (its hard time limit) so a running chunk is never delivered twice;
    # a chunk whose worker died is sent again sooner, by its stopped heartbeat (config/celery.py).
    CELERY_BROKER_TRANSPORT_OPTIONS: dict = {
        "visibility_timeout": env_int("CELERY_TASK_TIME_LIMIT", 600) + 300}
else:
    _broker = DATA_DIR / "broker"
    for _sub in ("queue", "processed", "control"):
        (_broker / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_URL = "filesystem://"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker / "queue"),
        "data_folder_out": str(_broker / "queue"),
        "processed_folder": str(_broker / "processed"),
        "control_folder": str(_broker / "control"),
        "store_processed": False,
    }
CELERY_RESULT_BACKEND = None  # progress and results live in the database (planner.models)
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 600)  # seconds per chunk
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 540)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A pool process whose resident memory grew past this (KiB) is replaced after its task.
CELERY_WORKER_MAX_MEMORY_PER_CHILD = env_int("CELERY_WORKER_MAX_MEMORY_PER_CHILD", 2 * 1024 * 1024)

# Resource guards (issue 23; planner/sweeps/pricing.py, simulator/batch/budget.py, docs/operations.md).
KVP_WORKER_MAX_BYTES = env_int("KVP_WORKER_MAX_BYTES", 6 * 2**30)  # address space of a pool process / sync run
KVP_RUN_MAX_BYTES = env_int("KVP_RUN_MAX_BYTES", 2 * 2**30)  # estimated memory of one simulation call
KVP_SYNC_MAX_SECONDS = env_int("KVP_SYNC_MAX_SECONDS", 10)  # estimated time of a run inside a web request
# Runs priced over this (estimated seconds) go to the workers and the request answers 202 with a job (issue 37).
KVP_INLINE_MAX_SECONDS = env_float("KVP_INLINE_MAX_SECONDS", 1.0)
# Load shedding (config/shedding.py): when connections waiting for a web worker would wait longer than this
# (seconds; 0: never shed), serve only the share that keeps the wait there and answer the others 503 with
# Retry-After at once, so that /healthz never waits past the health check's 5 s timeout behind a flood.
KVP_SHED_WAIT_S = env_float("KVP_SHED_WAIT_S", 1.0)
KVP_WEB_WORKERS = env_int("KVP_WEB_WORKERS", 3)  # gunicorn's --workers (docker-compose.yml): the estimate's divisor
KVP_SHED_RETRY_AFTER_S = env_int("KVP_SHED_RETRY_AFTER_S", 2)
KVP_SYNC_HARD_SECONDS = env_int("KVP_SYNC_HARD_SECONDS", 20)  # wall clock after which such a run is stopped
KVP_CHUNK_MAX_SECONDS = env_int("KVP_CHUNK_MAX_SECONDS", CELERY_TASK_SOFT_TIME_LIMIT // 2)  # estimate per chunk
KVP_USER_QUEUE_SECONDS = env_int("KVP_USER_QUEUE_SECONDS", 3600)  # estimated queued work per user
KVP_USER_MAX_SEARCHES = env_int("KVP_USER_MAX_SEARCHES", 3)  # deployment searches queued or running per user
KVP_USER_MAX_DAY_PLANS = env_int("KVP_USER_MAX_DAY_PLANS", 3)  # day plans queued or running per user
KVP_DAY_MAX_REQUESTS = env_int("KVP_DAY_MAX_REQUESTS", 2_000_000)  # requests of one day plan (at most the generator's)
KVP_DAY_MAX_HOURS = env_int("KVP_DAY_MAX_HOURS", 48)  # hours of traffic one day plan may cover
KVP_HEARTBEAT_S = env_float("KVP_HEARTBEAT_S", 5.0)  # how often running work stamps its heartbeat
KVP_STALL_AFTER_S = env_int("KVP_STALL_AFTER_S", 45)  # a running chunk without a heartbeat this long is stalled
if not 0 < KVP_HEARTBEAT_S < KVP_STALL_AFTER_S:
    raise ImproperlyConfigured(f"KVP_HEARTBEAT_S must be above 0 and below KVP_STALL_AFTER_S ({KVP_STALL_AFTER_S} s), "
                               f"got {KVP_HEARTBEAT_S}: a heartbeat no slower than the stall limit is what tells a "
                               "running chunk from a stalled one")
KVP_HEAL_INTERVAL_S = env_int("KVP_HEAL_INTERVAL_S", 15)  # how often a worker sends stalled chunks again
KVP_SWEEP_QUEUE = env_str("KVP_SWEEP_QUEUE", "")  # Celery queue of sweep tasks ("": Celery's default)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "accounts.authentication.ApiTokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticatedOrReadOnly"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # JSON nested past 32 levels, NUL characters and lone surrogates are a 400 naming the field.
    "DEFAULT_PARSER_CLASSES": [
        "config.parsers.CheckedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_THROTTLE_CLASSES": [
        "config.throttling.AnonRateThrottle",  # shared atomic counters (config.throttling.hit)
        "config.throttling.UserRateThrottle",
        "config.throttling.HeavyRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "anon": env_str("THROTTLE_ANON", "600/min"),
        "user": env_str("THROTTLE_USER", "3000/min"),
        "heavy": env_str("THROTTLE_HEAVY", "20/min"),  # simulations, replicas searches, calibrations, per user or IP
    },
    # Client IP: X-Forwarded-For is read only behind this many trusted proxies (0: REMOTE_ADDR only).
    "NUM_PROXIES": NUM_PROXIES,
    "EXCEPTION_HANDLER": "planner.api.errors.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "KV Planner API",
    "DESCRIPTION": "Capacity planning for LLM serving: KV sizing, simulations, sweeps and reports. "
    "`/api/` is version 1.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    # Swagger UI's assets come from drf-spectacular-sidecar's static files: /api/docs/ works offline.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Collapse the schemas section: /api/docs/ opens on the operations, not a wall of models.
    "SWAGGER_UI_SETTINGS": {"defaultModelsExpandDepth": -1},
    # Every operation documents its error statuses (400/401/403/404/413/415/429) in the error shape.
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums",
                             "planner.api.schema_hooks.document_error_statuses"],
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    # kombu warns "No hostname was supplied" for the embedded filesystem broker, which has none.
    "loggers": {"kombu.connection": {"level": "ERROR"}},
}
