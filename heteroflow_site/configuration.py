"""Reading the configuration from the environment, and saying what is wrong with it in a line or two.

The settings read every variable through `SettingsEnv`, so a malformed value names its variable; `local_secret_key`
gives management commands of a local run the key `make run` keeps in the data folder (docs/development.md,
"Running commands"); `run_management_command` (manage.py) turns a configuration error — a refused setting, an
unreachable PostgreSQL or Redis — into two lines and exit status 1 instead of a traceback, which `--traceback` or
`DEBUG` still show.
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path
from urllib.parse import urlsplit

import environ
from django.core.exceptions import ImproperlyConfigured

SECRET_KEY_FILE_NAME = "secret_key"
REDIS_SCHEMES = ("redis", "rediss", "unix")
TRUE_WORDS = ("true", "on", "ok", "y", "yes", "1")
EXIT_CONFIGURATION_ERROR = 1


class SettingsEnv(environ.Env):
    """django-environ's reader, whose cast errors (`int("ninety")`) name the variable they came from."""

    def get_value(self, var, cast=None, default=environ.Env.NOTSET, parse_default=False):
        try:
            return super().get_value(var, cast=cast, default=default, parse_default=parse_default)
        except (ValueError, TypeError) as error:
            raise ImproperlyConfigured(f"{var}={self.ENVIRON.get(var)!r} is malformed: {error}") from error


def keep_local_secret_key(data_dir: Path | str) -> Path:
    """`make run`'s key in the data folder: created once, readable by its owner only (0600, whatever the umask;
    a key kept by an earlier version, 0644, is narrowed too). The path."""
    path = Path(data_dir) / SECRET_KEY_FILE_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(descriptor, "w") as key_file:
            key_file.write(secrets.token_urlsafe(50) + "\n")
    os.chmod(path, 0o600)
    return path


def local_secret_key(data_dir: Path) -> str:
    """The key `make run` keeps in the data folder, or "" when there is none."""
    try:
        return (data_dir / SECRET_KEY_FILE_NAME).read_text().strip()
    except OSError:
        return ""


def postgres_database(env: SettingsEnv) -> dict:
    """DATABASE_URL as Django's database settings; only PostgreSQL is accepted (design §2 rests on it)."""
    try:
        database = env.db("DATABASE_URL")
    except (ImproperlyConfigured, ValueError) as error:
        raise ImproperlyConfigured(f"DATABASE_URL is malformed ({error}); expected postgres://user:pass@host:5432/name")
    if database.get("ENGINE") != "django.db.backends.postgresql":
        raise ImproperlyConfigured(
            f"DATABASE_URL must name a PostgreSQL database (postgres://user:pass@host:5432/name), "
            f"not a {urlsplit(env.str('DATABASE_URL')).scheme or 'scheme-less'} URL")
    return database


def redis_url(env: SettingsEnv) -> str:
    url = env.str("REDIS_URL")
    if urlsplit(url).scheme not in REDIS_SCHEMES:
        raise ImproperlyConfigured(
            f"REDIS_URL must start with redis://, rediss:// or unix:// (e.g. redis://127.0.0.1:6379/0), "
            f"got {_without_password(url)!r}")
    return url


def _without_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@")).geturl()


# --- management commands --------------------------------------------------------------------------------------


def configuration_error(error: BaseException) -> tuple[str, str] | None:
    """(what is wrong, how to fix it) when `error` comes from the configuration, else None (a bug: traceback)."""
    if isinstance(error, ImproperlyConfigured):
        # A message of two lines brings its own fix.
        what, _, fix = str(error).partition("\n")
        return what, fix or "Set it in the environment or in .env (README, For operators, Settings)."
    if (database_error := _database_connection_error(error)) is not None:
        return (f"cannot connect to PostgreSQL at {_database_location()} (DATABASE_URL): {_first_line(database_error)}",
                "Start PostgreSQL or correct DATABASE_URL; unset it to use the embedded one "
                "(docs/development.md, Running commands).")
    if (redis_error := _redis_connection_error(error)) is not None:
        return (f"cannot reach Redis at {_redis_location()} (REDIS_URL): {_first_line(redis_error)}",
                "Start Redis or correct REDIS_URL; unset it to use the embedded one "
                "(docs/development.md, Running commands).")
    return None


def _causes(error: BaseException):
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__


def _database_connection_error(error: BaseException) -> BaseException | None:
    import psycopg

    for cause in _causes(error):
        # No SQLSTATE: the connection attempt itself failed; class 08 and 57P01-57P03: the server is gone or going.
        if isinstance(cause, psycopg.OperationalError) and (
                cause.sqlstate is None or cause.sqlstate.startswith("08") or cause.sqlstate in ("57P01", "57P02",
                                                                                                "57P03")):
            return cause
    return None


def _redis_connection_error(error: BaseException) -> BaseException | None:
    import redis
    from kombu.exceptions import OperationalError as BrokerError

    for cause in _causes(error):
        if isinstance(cause, (redis.ConnectionError, redis.TimeoutError, BrokerError)):
            return cause
    return None


def _database_location() -> str:
    from django.conf import settings

    database = settings.DATABASES["default"]
    return f"{database.get('HOST') or 'localhost'}:{database.get('PORT') or 5432}/{database.get('NAME')}"


def _redis_location() -> str:
    from django.conf import settings

    return _without_password(settings.REDIS_URL)


def _first_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def _wants_traceback(argv: list[str]) -> bool:
    return "--traceback" in argv or os.environ.get("DEBUG", "").strip().lower() in TRUE_WORDS


def run_management_command(argv: list[str]) -> None:
    from django.conf import settings
    from django.core.management import execute_from_command_line

    try:
        # Django runs its own commands (makemigrations, shell, help) even when the settings failed to load, and they
        # then fail far from the cause: load the settings first.
        settings.INSTALLED_APPS  # noqa: B018 - loading is the point
        execute_from_command_line(argv)
    except Exception as error:
        explained = configuration_error(error)
        if explained is None or _wants_traceback(argv):
            raise
        what, fix = explained
        print(f"configuration error: {what}\n{fix} (--traceback shows where.)", file=sys.stderr)
        sys.exit(EXIT_CONFIGURATION_ERROR)
