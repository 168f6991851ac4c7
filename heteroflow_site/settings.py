from datetime import timedelta
from pathlib import Path
from urllib.parse import unquote

from django.core.exceptions import ImproperlyConfigured
from redis.asyncio.retry import Retry as RedisRetry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from heteroflow_site.configuration import SettingsEnv, local_secret_key, postgres_database, redis_url
from heteroflow_site.local_services import celery_broker_url, ensure_local_services
from heteroflow_site import periodic_jobs

BASE_DIR = Path(__file__).resolve().parent.parent

env = SettingsEnv()
if (BASE_DIR / ".env").exists():
    SettingsEnv.read_env(BASE_DIR / ".env")

DATA_DIR = Path(env.str("HETEROFLOW_DATA_DIR", default=str(BASE_DIR / ".data")))
DATA_DIR.mkdir(parents=True, exist_ok=True)
ensure_local_services(DATA_DIR)

DEVELOPMENT_SECRET_KEY = "heteroflow-development-only-secret-key-change-me"
# A local run's management commands use the key `make run` keeps in the data folder (docs/development.md,
# "Running commands").
SECRET_KEY = env.str("SECRET_KEY", default="") or local_secret_key(DATA_DIR) or DEVELOPMENT_SECRET_KEY
DEBUG = env.bool("DEBUG", default=False)
MIN_SECRET_KEY_LENGTH = 50
if SECRET_KEY == DEVELOPMENT_SECRET_KEY and not DEBUG:
    # Sessions, CSRF tokens and password resets would be signed with a key anyone can read in the source.
    raise ImproperlyConfigured(
        f"set SECRET_KEY (the development key is accepted only with DEBUG=true)\n"
        f"Export SECRET_KEY=$(python3 -c 'import secrets; print(secrets.token_urlsafe(50))'), or run `make run` once: "
        f"it keeps a key in {DATA_DIR / 'secret_key'}, which local commands then use.")
if len(SECRET_KEY) < MIN_SECRET_KEY_LENGTH and not DEBUG:
    # A short key is a guessable one (design §16.5); Django's own deploy check asks for 50 characters too.
    raise ImproperlyConfigured(f"SECRET_KEY has {len(SECRET_KEY)} characters; at least {MIN_SECRET_KEY_LENGTH} "
                               "are needed with DEBUG off\nMake one: python3 -c 'import secrets; "
                               "print(secrets.token_urlsafe(50))'")
# Django's test client's host ("testserver") is added by the test environment (setup_test_environment), not here.
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost"])
# The port the web process serves on (`make run PORT=…`, the Procfile): the default CSRF origins follow it.
WEB_PORT = env.int("PORT", default=8000)
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS",
                                default=[f"http://127.0.0.1:{WEB_PORT}", f"http://localhost:{WEB_PORT}"])

# Transport security (README, "Production" and "Settings"): secure cookies unless DEBUG; HSTS and the proxy header are
# opt-in because they are only right behind TLS / a proxy that sets the header.
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=not DEBUG)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=not DEBUG)
SESSION_COOKIE_HTTPONLY = True
_proxy_ssl_header = env.str("SECURE_PROXY_SSL_HEADER", default="")
SECURE_PROXY_SSL_HEADER = tuple(_proxy_ssl_header.split(",", 1)) if _proxy_ssl_header else None
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=False)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=False)
SECURE_CONTENT_TYPE_NOSNIFF = True

# Shared secret with which a new node agent may register itself; empty disables it. At least 32 characters, and the
# nodes it registers wait for an admin's approval unless HETEROFLOW_JOIN_AUTO_APPROVE (design §16.5).
HETEROFLOW_JOIN_TOKEN = env.str("HETEROFLOW_JOIN_TOKEN", default="")
MIN_JOIN_TOKEN_LENGTH = 32
if HETEROFLOW_JOIN_TOKEN and len(HETEROFLOW_JOIN_TOKEN) < MIN_JOIN_TOKEN_LENGTH:
    raise ImproperlyConfigured(f"HETEROFLOW_JOIN_TOKEN has {len(HETEROFLOW_JOIN_TOKEN)} characters; at least "
                               f"{MIN_JOIN_TOKEN_LENGTH} are needed")
HETEROFLOW_JOIN_AUTO_APPROVE = env.bool("HETEROFLOW_JOIN_AUTO_APPROVE", default=False)
# Seconds of uninterrupted healthy reports after which a quarantined card is released without an admin (design
# §17.3); 0 (the default) leaves every release to an admin.
HETEROFLOW_CARD_AUTO_RELEASE = env.int("HETEROFLOW_CARD_AUTO_RELEASE", default=0)
# Bearer token with which Prometheus may scrape /metrics; empty: staff sessions only.
HETEROFLOW_METRICS_TOKEN = env.str("HETEROFLOW_METRICS_TOKEN", default="")

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "knox",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "template_partials",
    "channels",
    "tenants",
    "nodes",
    "scheduling",
    "plugins_admin",
    "axes",
]

MIDDLEWARE = [
    "heteroflow_site.logs.RequestLogMiddleware",
    # A request whose connection died before its first statement runs once more on a new one (docs/operations.md).
    "heteroflow_site.database_retry.DatabaseRetryMiddleware",
    "heteroflow_site.auth_failures.FailedAuthenticationGate",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # API query parameters as the schema declares them, or a 400 naming them.
    "heteroflow_site.query_parameters.QueryParameterMiddleware",
    # Last, as django-axes asks: it turns a locked-out login into its lockout response.
    "axes.middleware.AxesMiddleware",
]

# Login throttling (django-axes): 5 failed logins for one username from one address lock that pair out for 15
# minutes; other users, and the same user from elsewhere, are not locked out by someone guessing.
# Sessions name the backend that logged their user in; tenants' migration 0006 moved those of Django's ModelBackend.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "tenants.authentication.SessionUserBackend"]
AXES_FAILURE_LIMIT = env.int("AXES_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = env.float("AXES_COOLOFF_HOURS", default=0.25)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
# The client's address behind proxies, for the API throttles and the lockouts (heteroflow_site.client_ip): how many
# proxies append to X-Forwarded-For, or which addresses are proxies; neither set: X-Forwarded-For is ignored.
NUM_PROXIES = env.int("NUM_PROXIES", default=0)
TRUSTED_PROXIES = env.list("TRUSTED_PROXIES", default=[])
AXES_CLIENT_IP_CALLABLE = "heteroflow_site.client_ip.client_ip"
# Failed authentications (401s) under /api/ one address may have per minute before its API calls are 429s.
HETEROFLOW_AUTH_FAILURES_PER_MINUTE = env.int("HETEROFLOW_AUTH_FAILURES_PER_MINUTE", default=30)
# Websockets (heteroflow_site.websockets): how many one user may hold open at once, and how often (seconds) an open
# one checks again that its user may still watch it.
HETEROFLOW_WEBSOCKETS_PER_USER = env.int("HETEROFLOW_WEBSOCKETS_PER_USER", default=20)
HETEROFLOW_WEBSOCKET_RECHECK_SECONDS = env.float("HETEROFLOW_WEBSOCKET_RECHECK_SECONDS", default=30.0)

ROOT_URLCONF = "heteroflow_site.urls"

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

WSGI_APPLICATION = "heteroflow_site.wsgi.application"
ASGI_APPLICATION = "heteroflow_site.asgi.application"

DATABASES = {"default": postgres_database(env)}
DATABASES["default"]["HOST"] = unquote(str(DATABASES["default"]["HOST"]))
DATABASES["default"]["CONN_MAX_AGE"] = env.int("DATABASE_CONN_MAX_AGE", default=0)
# A kept connection is checked before it is used again, so that a PostgreSQL restart costs no request
# (docs/operations.md): Django checks a persistent connection at its first use in each request, the project's
# backend each connection the pool below hands out.
DATABASES["default"]["ENGINE"] = "heteroflow_site.postgresql"
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# A runaway query or a lock held by a stuck transaction fails its request instead of piling requests up.
DATABASE_STATEMENT_TIMEOUT_MS = env.int("DATABASE_STATEMENT_TIMEOUT_MS", default=30_000)
DATABASE_LOCK_TIMEOUT_MS = env.int("DATABASE_LOCK_TIMEOUT_MS", default=10_000)
# PostgreSQL's JIT compiles a statement whose estimate passes jit_above_cost: ~40 ms spent compiling the scheduler's
# quota read of 10,000 tasks that returned no row (a large estimate where statistics are stale). No statement here
# runs long enough to win that back; DATABASE_JIT=true gives the server its default.
DATABASE_JIT = env.bool("DATABASE_JIT", default=False)
DATABASES["default"].setdefault("OPTIONS", {})["options"] = (
    f"-c statement_timeout={DATABASE_STATEMENT_TIMEOUT_MS} -c lock_timeout={DATABASE_LOCK_TIMEOUT_MS}"
    + ("" if DATABASE_JIT else " -c jit=off")
)
# A web server under ASGI runs every request in a thread of its own, and Django's connections are per thread: without
# a pool each request would open a PostgreSQL connection (tens of milliseconds). The Procfile's web process turns the
# pool on. Schedulers and Celery workers keep one connection each: they hold session-level advisory locks.
if env.bool("DATABASE_POOL", default=False):
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    # The backend checks what the pool hands out; psycopg_pool's own check (which Django gives it under
    # CONN_HEALTH_CHECKS, and refuses beside a `check` here) would wait seconds per dead connection after a restart.
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = False
    DATABASES["default"]["OPTIONS"]["pool"] = {
        "min_size": 2, "max_size": env.int("DATABASE_POOL_MAX_SIZE", default=16), "timeout": 10,
    }

REDIS_URL = redis_url(env)

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 8}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "static"
# Static files (htmx from django-htmx, the app's CSS) are served by WhiteNoise straight from the finders, so a fresh
# clone needs no collectstatic step.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/login/"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "tenants.authentication.UserTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # The API speaks JSON only (pages post their forms to views of their own): one body encoding, whose nesting the
    # schema describes exactly.
    "DEFAULT_PARSER_CLASSES": ["heteroflow_site.parsers.StorableJSONParser"],
    "DEFAULT_RENDERER_CLASSES": [
        "heteroflow_site.renderers.ORJSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "heteroflow_site.schema.NestedSerializerAutoSchema",
    "EXCEPTION_HANDLER": "heteroflow_site.api_errors.exception_handler",
    # Per anonymous address, per user and per node token (nodes.throttling); a 429 says when to retry.
    "DEFAULT_THROTTLE_CLASSES": [
        "nodes.throttling.AnonymousThrottle",
        "nodes.throttling.UserThrottle",
        "nodes.throttling.NodeTokenThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "anon": env.str("HETEROFLOW_THROTTLE_ANON", default="120/min"),
        "user": env.str("HETEROFLOW_THROTTLE_USER", default="1200/min"),
        "node": env.str("HETEROFLOW_THROTTLE_NODE", default="600/min"),
        # POST /api/v1/auth/token per address (tenants/token_apis.py), before the login lockout counts.
        "auth_token": env.str("HETEROFLOW_THROTTLE_AUTH_TOKEN", default="20/min"),
        # GET /api/v1/tasks/{id}/preemption-plan per user: each call plans over the whole cluster (issue 27 item 4).
        "preemption_plan": env.str("HETEROFLOW_THROTTLE_PREEMPTION_PLAN", default="30/min"),
        # DELETE /api/v1/tokens/{key} and the tokens page's Revoke, per user.
        "token_revoke": env.str("HETEROFLOW_THROTTLE_TOKEN_REVOKE", default="30/min"),
    },
}

# Unexpired API tokens one user may hold (POST /api/v1/tokens beyond it is a 409 too_many_tokens).
HETEROFLOW_TOKENS_PER_USER = env.int("HETEROFLOW_TOKENS_PER_USER", default=20)
# API tokens of users (django-rest-knox): only a SHA-512 digest is stored, a user may hold several (one per client)
# and revoke each; an unused token expires after HETEROFLOW_TOKEN_TTL_DAYS, one in use is refreshed as it is used.
# Knox's own table (its swappable default, named because tenants.ApiTokenName refers to it).
KNOX_TOKEN_MODEL = "knox.AuthToken"
REST_KNOX = {
    "TOKEN_TTL": timedelta(days=env.int("HETEROFLOW_TOKEN_TTL_DAYS", default=90)),
    "AUTO_REFRESH": True,
    "TOKEN_PREFIX": "hfu_",
    "AUTH_HEADER_PREFIX": "Token",
}

# Throttle counters live in each process' memory: an API that answers while Redis is down matters more than
# counting exactly across processes (the limits are per process, so N web processes allow N times the rate).
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "heteroflow"}}

# Most pending tasks one tenant may have at once; beyond it a submission is a 429 (issue 13).
HETEROFLOW_MAX_PENDING_PER_TENANT = env.int("HETEROFLOW_MAX_PENDING_PER_TENANT", default=10_000)
# Request bodies over this are a 413 before anything reads them (`heteroflow_site.body_limit`, design §16.5).
HETEROFLOW_MAX_BODY_BYTES = env.int("HETEROFLOW_MAX_BODY_BYTES", default=1024 * 1024)
# About one response in this many asks its client to reconnect, so that web processes on one port share the load
# (`heteroflow_site.keep_alive`, docs/operations.md); 0: never.
HETEROFLOW_REQUESTS_PER_CONNECTION = env.int("HETEROFLOW_REQUESTS_PER_CONNECTION", default=50)
# Usage over time (design §17.4): the half-life of past usage in the `fair-share` queue order, in days; how long a
# finished task (attempts, events, log) is kept; the log bytes one tenant's tasks may keep in all.
HETEROFLOW_FAIR_SHARE_HALF_LIFE = env.float("HETEROFLOW_FAIR_SHARE_HALF_LIFE", default=7.0)
HETEROFLOW_TASK_RETENTION_DAYS = env.int("HETEROFLOW_TASK_RETENTION_DAYS", default=30)
HETEROFLOW_TENANT_LOG_BYTES = env.int("HETEROFLOW_TENANT_LOG_BYTES", default=1024 ** 3)

SPECTACULAR_SETTINGS = {
    "TITLE": "HeteroFlow API",
    "DESCRIPTION": "Control plane of a heterogeneous GPU cluster.",
    "VERSION": "1.0.0",
    # 3.1: JSON Schema itself, so request bodies can say what the API checks (label keys as `propertyNames`).
    "OAS_VERSION": "3.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI and ReDoc from the sidecar package's static files: no page loads anything from another host.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "heteroflow_site.api_errors.add_error_responses",
        "heteroflow_site.schema.add_links",
        "plugins_admin.api_schema.publish_plugin_settings",
        "heteroflow_site.schema.close_request_bodies",
        "heteroflow_site.schema.any_value_without_null_variant",
    ],
    "ENUM_NAME_OVERRIDES": {
        "TaskStatusEnum": "scheduling.models.TaskStatus",
        # Named as before the group's 201 answer (TaskGroupCreatedOutput) shared it with TaskGroupOutput.
        "TaskGroupOutputStatusEnum": "scheduling.models.TaskGroup.Status",
        "TenantStatusEnum": "tenants.models.Tenant.Status",
        "NodeStatusEnum": "nodes.models.Node.Status",
        "TaskTypeEnum": "scheduling.models.TaskType",
        "TaskGroupTypeEnum": [("training", "training"), ("inference", "inference")],
        "GpuTypeEnum": "nodes.models.GPU_TYPE_CHOICES",
    },
}

# A pooled Redis connection that died with its server (a Redis restart) is opened again and its command sent once
# more, for up to ~1 s of outage; redis-py's own pools (the immediate queue's) do so by default, the channel layer's
# pools (built by channels_redis) only when asked (docs/operations.md).
_redis_reconnect = {"retry": RedisRetry(ExponentialBackoff(cap=0.5, base=0.1), 4),
                   "retry_on_error": [RedisConnectionError]}
# redis-py 8 reads with a 5 s socket timeout by default, the same 5 s the layer's blocking pop waits on an empty
# channel: an idle socket then races the pop's own empty answer and dies with a TimeoutError.
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": 15, **_redis_reconnect}]},
    }
}

CELERY_BROKER_URL = celery_broker_url(REDIS_URL)
CELERY_TASK_IGNORE_RESULT = True
# Workers log through LOGGING below (human or JSON lines), not through Celery's own root handler.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_TIMEZONE = TIME_ZONE
# The periodic jobs (docs/scheduling.md, The cycle; Nodes and the other loops), from their one table. A tick still
# queued when the next one is due is dropped rather than run late: a stuck worker cannot pile ticks up.
PERIODIC_JOBS = periodic_jobs.PERIODIC_JOBS
CELERY_BEAT_SCHEDULE = periodic_jobs.beat_schedule(PERIODIC_JOBS)
# A task stuck past the soft limit gets SoftTimeLimitExceeded (its transaction rolls back); past the hard limit its
# worker process is replaced.
CELERY_TASK_SOFT_TIME_LIMIT = env.int("HETEROFLOW_TASK_SOFT_TIME_LIMIT", default=120)
CELERY_TASK_TIME_LIMIT = env.int("HETEROFLOW_TASK_TIME_LIMIT", default=150)

# docs/scheduling.md, Configuration. Every figure can be overridden from the environment.
SCHEDULER = {
    "default_task_timeout": env.int("HETEROFLOW_DEFAULT_TASK_TIMEOUT", default=7200),
    "gpu_reserve_fixed_mb": env.int("HETEROFLOW_GPU_RESERVE_FIXED_MB", default=500),
    "gpu_reserve_percent": env.int("HETEROFLOW_GPU_RESERVE_PERCENT", default=10),
    "port_range_start": env.int("HETEROFLOW_PORT_RANGE_START", default=8000),
    "port_range_end": env.int("HETEROFLOW_PORT_RANGE_END", default=8999),
    "inference_max_per_node": env.int("HETEROFLOW_INFERENCE_MAX_PER_NODE", default=16),
    "heartbeat_timeout": env.int("HETEROFLOW_HEARTBEAT_TIMEOUT", default=30),
    # Off: scheduler instances take turns, one cycle at a time (scheduling.cycle.turns).
    "concurrent_cycles": env.bool("HETEROFLOW_CONCURRENT_CYCLES", default=False),
    # Offline this long (seconds) and the node is lost: its tasks leave it (design §15.4).
    "node_lost_timeout": env.int("HETEROFLOW_NODE_LOST_TIMEOUT", default=300),
    # A job of 2+ cards waiting this long (seconds) may become its GPU type's reserved job (design §16.3).
    "reserve_after": env.int("HETEROFLOW_RESERVE_AFTER", default=300),
    # Crash-loop backoff of inference replicas (scheduling.groups.crash_loop): a replica failing within
    # replica_stable_seconds of its start is a crash; the next replica waits the base doubled per consecutive crash,
    # at most the cap (seconds).
    "replica_backoff_seconds": env.int("HETEROFLOW_REPLICA_BACKOFF", default=10),
    "replica_backoff_max_seconds": env.int("HETEROFLOW_REPLICA_BACKOFF_MAX", default=300),
    "replica_stable_seconds": env.int("HETEROFLOW_REPLICA_STABLE_SECONDS", default=600),
    "load_thresholds": {
        "gpu_memory_percent": env.int("HETEROFLOW_GPU_MEMORY_PERCENT", default=95),
        "gpu_utilization_percent": env.int("HETEROFLOW_GPU_UTILIZATION_PERCENT", default=95),
        "cpu_percent": env.int("HETEROFLOW_CPU_PERCENT", default=90),
        "memory_percent": env.int("HETEROFLOW_MEMORY_PERCENT", default=90),
        "gpu_temperature_threshold": env.int("HETEROFLOW_GPU_TEMPERATURE_THRESHOLD", default=79),
    },
}

# Where `manage.py replay_trace --report` keeps its reports; the plugin page links the newest.
REPLAY_REPORT_DIR = Path(env.str("HETEROFLOW_REPLAY_REPORT_DIR", default=str(DATA_DIR / "replay")))

# Dotted paths of extra scheduling plugin factories (see docs/custom-plugins.md).
HETEROFLOW_EXTRA_PLUGINS = env.list("HETEROFLOW_EXTRA_PLUGINS", default=[])

EMAIL_BACKEND = env.str("EMAIL_BACKEND", default="django.core.mail.backends.console.EmailBackend")

# Human lines by default, JSON lines with LOG_FORMAT=json; each carries request id, user, tenant, task and cycle
# where known (heteroflow_site.logs). One line per request from RequestLogMiddleware (agent polling at debug), so
# daphne's own access log is off (Procfile) and django.request only reports server errors.
LOG_FORMAT = env.str("LOG_FORMAT", default="human")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"context": {"()": "heteroflow_site.logs.ContextFilter"}},
    "formatters": {
        "human": {"()": "heteroflow_site.logs.HumanFormatter"},
        "json": {"()": "heteroflow_site.logs.JsonLineFormatter"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "json" if LOG_FORMAT == "json" else "human",
                    "filters": ["context"]},
    },
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {
        "django.request": {"level": "ERROR"},
        # Celery would add a line per tick sent and per task run (several a second); failures still show.
        "celery.beat": {"level": "WARNING"},
        "celery.app.trace": {"level": "WARNING"},
        "celery.worker.strategy": {"level": "WARNING"},
        # pgserver reports every process exit, after logging has shut down; its warnings are enough.
        "pgserver": {"level": "WARNING"},
    },
}
