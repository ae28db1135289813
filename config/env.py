"""Tiny typed readers for environment variables; a bad value raises ImproperlyConfigured."""

from __future__ import annotations

import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    """The variable as a string, or ``default`` when unset."""
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    """The variable as a boolean (1/true/yes/on, 0/false/no/off)."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (true/false), got {raw!r}")


def env_int(name: str, default: int) -> int:
    """The variable as an integer."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from exc


def env_float(name: str, default: float) -> float:
    """The variable as a finite number."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}") from exc
    if value != value or value in (float("inf"), float("-inf")):
        raise ImproperlyConfigured(f"{name} must be a finite number, got {raw!r}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    """A comma-separated list, blanks dropped."""
    raw = os.environ.get(name)
    if raw is None:
        return list(default)
    return [item.strip() for item in raw.split(",") if item.strip()]


def read_env_file(path: Path) -> dict[str, str]:
    """``KEY=VALUE`` lines of a local settings file (``#`` comments and blank lines skipped)."""
    values: dict[str, str] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, eq, value = line.partition("=")
        if not eq or not key.strip():
            raise ImproperlyConfigured(f"{path.name} line {number}: expected KEY=VALUE, got {line!r}")
        values[key.strip()] = value.strip().strip("'\"")
    return values


def load_env_file(path: Path) -> bool:
    """Fill in the variables ``path`` sets that the environment does not; False when there is no file.

    The environment always wins, so a deployment that sets ``DEBUG=false`` is never turned into a
    development server by a stray file.
    """
    if not path.is_file():
        return False
    for key, value in read_env_file(path).items():
        os.environ.setdefault(key, value)
    return True
