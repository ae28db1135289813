"""Settings come from the environment; production settings pass ``check --deploy``; migrations are complete."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command

from config import env

ROOT = Path(__file__).resolve().parent.parent


def _manage(*args: str, extra_env: dict[str, str]) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in {"DEBUG", "SECRET_KEY", "SECURE_SSL_REDIRECT", "ALLOWED_HOSTS"}}
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env={**clean, **extra_env}, capture_output=True, text=True
    )


def test_check_deploy_is_clean_with_production_settings(tmp_path):
    result = _manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        extra_env={
            "SECRET_KEY": "x7#kQ9!vR2@pL5$wN8^zT1&yB4*cF6(hJ3)mD0-sG_aE+uK-Vq8rWz3Lp0Xc",
            "ALLOWED_HOSTS": "kvplanner.example.com",
            "KVP_DATA_DIR": str(tmp_path),
        },
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_missing_secret_key_in_production_is_refused(tmp_path):
    result = _manage("check", extra_env={"SECRET_KEY": "", "KVP_DATA_DIR": str(tmp_path)})
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr


@pytest.mark.parametrize("beat,stall", [("0", "45"), ("-1", "45"), ("45", "45"), ("60", "45")])
def test_a_heartbeat_not_below_the_stall_limit_is_refused(tmp_path, beat, stall):
    result = _manage("check", extra_env={"SECRET_KEY": "x", "DEBUG": "true", "KVP_DATA_DIR": str(tmp_path),
                                         "KVP_HEARTBEAT_S": beat, "KVP_STALL_AFTER_S": stall})
    assert result.returncode != 0
    assert "KVP_HEARTBEAT_S must be above 0 and below KVP_STALL_AFTER_S (45 s)" in result.stderr


def test_a_heartbeat_below_the_stall_limit_is_taken(tmp_path):
    result = _manage("check", extra_env={"SECRET_KEY": "x", "DEBUG": "true", "KVP_DATA_DIR": str(tmp_path),
                                         "KVP_HEARTBEAT_S": "1", "KVP_STALL_AFTER_S": "6"})
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("raw,expected", [("true", True), ("0", False), ("ON", True), ("no", False)])
def test_env_bool_reads_common_spellings(monkeypatch, raw, expected):
    monkeypatch.setenv("KVP_FLAG", raw)
    assert env.env_bool("KVP_FLAG") is expected


def test_env_bool_rejects_nonsense(monkeypatch):
    monkeypatch.setenv("KVP_FLAG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="KVP_FLAG must be a boolean"):
        env.env_bool("KVP_FLAG")


def test_env_int_rejects_nonsense(monkeypatch):
    monkeypatch.setenv("KVP_N", "ten")
    with pytest.raises(ImproperlyConfigured, match="KVP_N must be an integer"):
        env.env_int("KVP_N", 1)


@pytest.mark.django_db
def test_models_and_migrations_agree():
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)


POSTGRES_URL = os.environ.get("KVP_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test")
HEALTH_AFTER_TERMINATE = """
import psycopg
from wsgiref.util import setup_testing_defaults
from config.wsgi import application  # the production handler (the test Client skips close_old_connections)
from django.db import connection

def get():
    environ = {"PATH_INFO": "/healthz", "HTTP_HOST": "127.0.0.1"}
    setup_testing_defaults(environ)
    status = []
    b"".join(application(environ, lambda s, h, *a: status.append(s)))
    return status[0].split()[0]

first = get()
pid = connection.connection.info.backend_pid  # the persistent connection the request used
with psycopg.connect(dsn, autocommit=True) as admin:
    admin.execute("SELECT pg_terminate_backend(%s)", [pid])
print(first, get(), get())
"""


def test_a_terminated_database_connection_is_not_a_500():
    """Issue 37: after PostgreSQL terminated the app's connections, each gunicorn worker answered one 500 on
    its persistent connection. With CONN_HEALTH_CHECKS the next request reconnects (real PostgreSQL)."""
    import subprocess
    import sys

    try:
        import psycopg

        psycopg.connect(POSTGRES_URL.replace("postgres://", "postgresql://"), connect_timeout=3).close()
    except Exception as exc:  # noqa: BLE001
        from tests.conftest import missing_part

        missing_part(f"PostgreSQL not reachable at {POSTGRES_URL}: {exc}")
    code = HEALTH_AFTER_TERMINATE.replace("dsn", repr(POSTGRES_URL.replace("postgres://", "postgresql://")))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True,
                         env={**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings",
                              "DATABASE_URL": POSTGRES_URL, "DATABASE_CONN_MAX_AGE": "60"})
    assert out.stdout.split() == ["200", "200", "200"], out.stderr[-2000:]
