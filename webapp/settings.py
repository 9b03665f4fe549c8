"""Settings, from the environment only.

The defaults run the embedded setup (SQLite under GAGAR_DATA_DIR, a broker
that needs no server); a cluster sets DATABASE_URL and CELERY_BROKER_URL.
DEBUG is off unless asked for. Without SECRET_KEY, one is made once and kept in
GAGAR_DATA_DIR/secret_key, except in the production profile, which requires it.
GAGAR_PROFILE=production is the profile for serving behind a TLS proxy: HTTPS only,
secure cookies, HSTS; `manage.py check --deploy` reports nothing under it.
"""

import os
import secrets
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from grading import limits

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name, default=False):
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name, default=""):
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


DEBUG = env_bool("DEBUG")
PROFILE = os.environ.get("GAGAR_PROFILE", "")
if PROFILE not in ("", "production"):
    raise ImproperlyConfigured(f"GAGAR_PROFILE={PROFILE!r}: the only profile is 'production'")
PRODUCTION = PROFILE == "production"
if PRODUCTION and DEBUG:
    raise ImproperlyConfigured("DEBUG must be off in the production profile")
DATA_DIR = Path(os.environ.get("GAGAR_DATA_DIR", BASE_DIR / "var")).resolve()
DATA_DIR.mkdir(parents=True, exist_ok=True)
# Read before the environment's settings below: names read above it (where the instance lies,
# its profile) can only come from the environment.
SET_BEFORE_THE_INSTANCE_FILE = ("GAGAR_DATA_DIR", "GAGAR_PROFILE")


def instance_settings(path: Path) -> dict[str, str]:
    """The GAGAR_* settings an instance keeps in `path` (DATA_DIR/instance.env, `NAME=value` lines,
    `#` comments), so that every process of one instance (web app, workers, manage.py in any
    shell) runs with them, not only the shell that exported them. ImproperlyConfigured names the
    file, the line and what is wrong with it."""
    if not path.exists():
        return {}
    found = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, equals, value = line.partition("=")
        name = name.strip()
        problem = ("not NAME=value" if not equals else
                   f"{name!r} is not a GAGAR_ setting" if not name.startswith("GAGAR_") or not name.isidentifier() else
                   f"{name} is read before this file: set it in the environment" if name in SET_BEFORE_THE_INSTANCE_FILE
                   else "")
        if problem:
            raise ImproperlyConfigured(f"{path}:{number}: {problem}")
        found[name] = value.strip()
    return found


# The environment wins over the instance's file: a variable set in both is the environment's.
for _name, _value in instance_settings(DATA_DIR / "instance.env").items():
    os.environ.setdefault(_name, _value)


def kept_secret_key(data_dir: Path) -> str:
    """The secret key kept in `data_dir`/secret_key, made on first use, so that every command
    of one instance (web app, workers, manage.py) signs alike without a SECRET_KEY. Written
    whole under another name, then linked: a process starting at the same time reads either
    nothing or the whole key, and the first link wins."""
    path = data_dir / "secret_key"
    if not path.exists():
        draft = data_dir / f".secret_key.{os.getpid()}"
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(50))
        try:
            os.link(draft, path)
        except FileExistsError:
            pass
        finally:
            draft.unlink()
    return path.read_text().strip()


SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    if PRODUCTION:
        raise ImproperlyConfigured("SECRET_KEY is required in the production profile")
    SECRET_KEY = kept_secret_key(DATA_DIR)

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost" if DEBUG else "")
if PRODUCTION and not ALLOWED_HOSTS:
    raise ImproperlyConfigured("ALLOWED_HOSTS is required in the production profile")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "ninja",  # the API docs page from local static files, not a CDN (the CSP allows 'self' only)
    "axes",
    "webapp",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "webapp.middleware.content_security_policy",
    "webapp.middleware.SitePages",
    "django_htmx.middleware.HtmxMiddleware",
    "axes.middleware.AxesMiddleware",  # last: it turns a refused login into the lockout page
]

ROOT_URLCONF = "webapp.urls"
WSGI_APPLICATION = "webapp.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # The shared layout, then each feature folder's own templates/<feature>/.
        "DIRS": [BASE_DIR / "templates", *sorted((BASE_DIR / "webapp").glob("*/templates"))],
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
        os.environ.get("DATABASE_URL", f"sqlite:///{DATA_DIR / 'gagar.sqlite3'}"),
        conn_max_age=int(os.environ.get("DB_CONN_MAX_AGE", "0")),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the web process read while a worker writes.
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
    }
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / "test.sqlite3")}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# Failed logins are counted per account and per client address (django-axes): the
# AXES_FAILURE_LIMIT-th failure with no AXES_COOLOFF_TIME-hour pause locks that account
# and that address out, the right password included, until the pause has passed. A
# success resets no count: axes would reset the address's count too, so one valid
# account would let its holder guess others' passwords without end.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = int(os.environ.get("GAGAR_LOGIN_FAILURE_LIMIT", "5"))
AXES_COOLOFF_TIME = float(os.environ.get("GAGAR_LOGIN_COOLOFF_HOURS", "0.25"))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_CLIENT_IP_CALLABLE = "webapp.logins.client_address"
AXES_USERNAME_CALLABLE = "webapp.logins.attempted_username"
# Reverse proxies in front of the app, each appending to X-Forwarded-For: the client
# address is the one the outermost of them saw. 0: REMOTE_ADDR is the client.
GAGAR_TRUSTED_PROXIES = int(os.environ.get("GAGAR_TRUSTED_PROXIES", "1" if PRODUCTION else "0"))

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "index"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "staticfiles"

SESSION_COOKIE_SECURE = env_bool("SECURE_COOKIES", PRODUCTION)
CSRF_COOKIE_SECURE = env_bool("SECURE_COOKIES", PRODUCTION)
SESSION_COOKIE_HTTPONLY = True
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
if PRODUCTION:
    # TLS ends at the reverse proxy, which must set X-Forwarded-Proto (and strip a client's own).
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = True
    SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", str(365 * 24 * 3600)))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True

# Rollout import: a reward at or above this counts as a pass unless the
# line says `passed` explicitly.
GAGAR_PASS_THRESHOLD = float(os.environ.get("GAGAR_PASS_THRESHOLD", "1.0"))

CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "filesystem://")
CELERY_BROKER_DIR = Path(os.environ.get("CELERY_BROKER_DIR", DATA_DIR / "broker")).resolve()
CELERY_VISIBILITY_TIMEOUT = int(os.environ.get("CELERY_VISIBILITY_TIMEOUT", "7200"))
CELERY_REDIS_KEYPREFIX = os.environ.get("CELERY_REDIS_KEYPREFIX", "")
GAGAR_SWEEP_INTERVAL = float(os.environ.get("GAGAR_SWEEP_INTERVAL", "15"))

# Background work, per kind (webapp/work.py), each GAGAR_<KIND>_<NAME> from the environment:
# - every task: SOFT_TIME_LIMIT (the task gives its work back) below TIME_LIMIT (the process is
#   killed), both below CELERY_VISIBILITY_TIMEOUT (Redis redelivers an unacknowledged message
#   after it);
# - claimed work (gradings, exports): a worker renews its LEASE every HEARTBEAT seconds; the
#   sweep, every GAGAR_SWEEP_INTERVAL, queues again those whose lease ran out (a killed
#   worker's: back in the queue within lease + interval) up to MAX_ATTEMPTS attempts in all,
#   sends the messages a broker outage kept back, and sends again those older than
#   RESEND_AFTER; CHUNK gradings go in one message.
WORK_DEFAULTS = {
    "GRADING": {"SOFT_TIME_LIMIT": 1800, "TIME_LIMIT": 2100, "LEASE": 30.0, "HEARTBEAT": 5.0, "MAX_ATTEMPTS": 3,
                "RESEND_AFTER": 3600, "CHUNK": 50},
    "EXPORT": {"SOFT_TIME_LIMIT": 1800, "TIME_LIMIT": 2100, "LEASE": 30.0, "HEARTBEAT": 5.0, "MAX_ATTEMPTS": 3,
               "RESEND_AFTER": 3600},
    "RENDER": {"SOFT_TIME_LIMIT": 1800, "TIME_LIMIT": 2100},
    "SEARCH": {"SOFT_TIME_LIMIT": 1800, "TIME_LIMIT": 2100},
    "AUDIT_FIGURES": {"SOFT_TIME_LIMIT": 1800, "TIME_LIMIT": 2100},
    "RUN_FIGURES": {"SOFT_TIME_LIMIT": 600, "TIME_LIMIT": 660},  # a batch's figures, the grading panel's too
    "SWEEP": {"SOFT_TIME_LIMIT": 300, "TIME_LIMIT": 360},
    # A group's evidence pass: SECONDS of runs, RUNS runs and EXISTING_FILES of the codebase's
    # test files at most (grading.execution.GroupBudget), within its task's time limits.
    "EVIDENCE": {"SOFT_TIME_LIMIT": 2400, "TIME_LIMIT": 2700, "LEASE": 60.0, "HEARTBEAT": 10.0, "MAX_ATTEMPTS": 3,
                 "RESEND_AFTER": 7200, "SECONDS": 1800.0, "RUNS": 200, "EXISTING_FILES": 20},
}


def env_number(name, default):
    """A number from the environment, of `default`'s type, positive."""
    try:
        value = type(default)(os.environ.get(name, str(default)))
    except ValueError:
        raise ImproperlyConfigured(f"{name}={os.environ[name]!r}: not a number") from None
    if value <= 0:
        raise ImproperlyConfigured(f"{name}={value}: must be above 0")
    return value


for _kind, _defaults in WORK_DEFAULTS.items():
    for _name, _default in _defaults.items():
        globals()[f"GAGAR_{_kind}_{_name}"] = env_number(f"GAGAR_{_kind}_{_name}", _default)
# Execution evidence (docs/execution.md): the codebase store, a folder of git mirrors and
# snapshots; unset, no group gets evidence and grading goes on without it. The sandbox the
# workers run candidates in (docs/sandbox.md): `bwrap`, with these host folders read-only besides
# the system's (a task's interpreter must lie in one), or `command` with its template.
GAGAR_CODEBASES = os.environ.get("GAGAR_CODEBASES", "")
GAGAR_SANDBOX = os.environ.get("GAGAR_SANDBOX", "bwrap")
GAGAR_SANDBOX_PATHS = env_list("GAGAR_SANDBOX_PATHS")
GAGAR_SANDBOX_TEMPLATE = os.environ.get("GAGAR_SANDBOX_TEMPLATE", "")
# The worker's environment variables the template's runtime gets besides PATH and HOME
# (DOCKER_HOST...): nothing else of it, the worker's secrets included, reaches the runtime.
GAGAR_SANDBOX_ENV = env_list("GAGAR_SANDBOX_ENV")
# The most each run may take, whatever a task's environment asks (it may ask up to 64 GiB and an
# hour, grading/execution/environment.py): the evidence pass and a grader's code tools run the
# task within these, and the group page says when its request was lowered.
GAGAR_SANDBOX_MAX_MEMORY_MB = env_number("GAGAR_SANDBOX_MAX_MEMORY_MB", 4096)
GAGAR_SANDBOX_MAX_WALL_SECONDS = env_number("GAGAR_SANDBOX_MAX_WALL_SECONDS", 600.0)
if GAGAR_SANDBOX_MAX_MEMORY_MB < 64:  # grading.execution.environment.MIN_MEMORY_MB, not imported here
    raise ImproperlyConfigured(f"GAGAR_SANDBOX_MAX_MEMORY_MB={GAGAR_SANDBOX_MAX_MEMORY_MB}: must be at least 64, "
                               "the least memory a run may have")
# Queue per `module:Class` grader, "name=queue,..."; those not listed go to "gpu". Profiles
# name their own queue (the built-in heuristic one: cpu).
GAGAR_GRADER_QUEUES = dict(item.split("=", 1) for item in env_list("GAGAR_GRADER_QUEUES"))
# Advantages (exports, the `advantages` command) are read this many groups at a time: memory
# against queries per export.
GAGAR_EXPORT_CHUNK_GROUPS = int(os.environ.get("GAGAR_EXPORT_CHUNK_GROUPS", "2000"))

# API: a streamed upload (a batch, or one training step's rollouts) larger than this is refused (413).
GAGAR_API_UPLOAD_LIMIT = int(os.environ.get("GAGAR_API_UPLOAD_LIMIT", str(2 * 1024**3)))
# API: refused tokens (unknown, revoked, an inactive user's) are counted per client address in
# the default cache; once GAGAR_API_TOKEN_FAILURE_LIMIT were refused within
# GAGAR_API_TOKEN_FAILURE_WINDOW seconds of the first, every token from that address, a valid
# one too, is refused (429) until the window ends (webapp/api/throttle.py).
GAGAR_API_TOKEN_FAILURE_LIMIT = int(os.environ.get("GAGAR_API_TOKEN_FAILURE_LIMIT", "20"))
GAGAR_API_TOKEN_FAILURE_WINDOW = float(os.environ.get("GAGAR_API_TOKEN_FAILURE_WINDOW", "600"))
# Rollout import (command line, batches page, API): the most trajectories one group may have, and the
# lines (blank ones included) and decompressed bytes one import may read (grading/limits.py says why).
GAGAR_MAX_GROUP_SIZE = int(os.environ.get("GAGAR_MAX_GROUP_SIZE", limits.MAX_GROUP_SIZE))
GAGAR_MAX_IMPORT_LINES = int(os.environ.get("GAGAR_MAX_IMPORT_LINES", limits.MAX_IMPORT_LINES))
GAGAR_MAX_IMPORT_BYTES = int(os.environ.get("GAGAR_MAX_IMPORT_BYTES", limits.MAX_IMPORT_BYTES))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "WARNING")},
    # Django's own handlers on "django" off: its records reach the root's handler once. (With
    # DEBUG its console handler printed every 403 and 500 a second time; its mail_admins
    # handler sends nothing without ADMINS.)
    "loggers": {"django": {"handlers": []}},
}
