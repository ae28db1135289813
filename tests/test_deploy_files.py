"""docker-compose.yml, .env.example and the Dockerfile: plain HTTP out of the box, secrets from the environment."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
VARIABLE = re.compile(r"\$\{(\w+)(?::?[-?]([^}]*))?\}")


def _example_env() -> dict[str, str]:
    lines = (ROOT / ".env.example").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line.strip() and not line.startswith("#"))


def _resolve(value: str, env: dict[str, str]) -> str:
    """Compose's interpolation: ``${VAR:-default}`` and ``${VAR:?message}``."""
    def one(m: re.Match) -> str:
        if env.get(m.group(1)):
            return env[m.group(1)]
        assert "?" not in m.group(0), f"{m.group(1)} is required: {m.group(2)}"
        return m.group(2) or ""

    return VARIABLE.sub(one, str(value))


def test_every_service_restarts_and_the_worker_gets_time_to_finish():
    for name, service in COMPOSE["services"].items():
        assert service.get("restart") == "unless-stopped", name
    grace = COMPOSE["services"]["worker"]["stop_grace_period"]
    assert re.fullmatch(r"\d+m", grace) and int(grace[:-1]) >= 1


def test_no_secret_or_password_is_written_in_the_compose_file():
    text = (ROOT / "docker-compose.yml").read_text()
    for name in ("SECRET_KEY", "POSTGRES_PASSWORD"):
        assert re.search(rf"\$\{{{name}:\?", text), f"{name} must come from the environment, required"
        assert _example_env()[name] == "", f".env.example must leave {name} empty"
    assert "kvplanner:kvplanner@" not in text
    used = {m.group(1) for m in VARIABLE.finditer(text)}
    assert used <= set(_example_env()), f".env.example does not list {sorted(used - set(_example_env()))}"


def test_the_image_installs_the_locked_dependencies_with_hashes():
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "pip install --require-hashes -r requirements.lock" in dockerfile
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {"local.env", ".env"} <= set(ignored), "development settings must never reach the image"


def test_the_compose_settings_serve_plain_http_on_localhost(tmp_path):
    env = {**_example_env(), "SECRET_KEY": "s" * 50, "POSTGRES_PASSWORD": "pw"}
    app_env = {k: _resolve(v, env) for k, v in COMPOSE["x-app"]["environment"].items()}
    assert app_env["DATABASE_URL"] == "postgres://kvplanner:pw@postgres:5432/kvplanner"
    app_env.update(DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}", REDIS_URL="", KVP_DATA_DIR=str(tmp_path))
    probe = (
        "import django; django.setup()\n"
        "from django.test import Client\n"
        "for path in ('/healthz', '/accounts/login/'):\n"
        "    r = Client().get(path, HTTP_HOST='localhost')\n"
        "    print(path, r.status_code, r.get('Location', ''))\n"
    )
    base = {k: v for k, v in os.environ.items() if k not in {"SECURE_SSL_REDIRECT", "ALLOWED_HOSTS", "SECRET_KEY"}}
    env = {**base, **app_env, "DJANGO_SETTINGS_MODULE": "config.settings", "KVP_ENV_FILE": ""}
    subprocess.run([sys.executable, "manage.py", "migrate", "--no-input", "-v0"], cwd=ROOT, env=env, check=True)
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["/healthz 200 ", "/accounts/login/ 200 "], done.stdout
