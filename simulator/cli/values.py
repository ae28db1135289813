"""Values the command line parses the same way in several commands (``simulator.cli.commands`` and the commands
that must not import it, such as ``simulator.cli.disaggregated``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from simulator.base.errors import FieldError


def whole_numbers(text: str, option: str, error: type[Exception]) -> list[int]:
    """``N`` or ``N1,N2,...`` as distinct whole numbers; ``error`` (naming ``option``) otherwise."""
    out: list[int] = []
    for part in text.split(","):
        try:
            v = int(part.strip())
        except ValueError:
            raise error(f"{option} {text!r}: expected N or N1,N2,... (whole numbers)") from None
        if v in out:
            raise error(f"{option} {text!r}: {v} given twice")
        out.append(v)
    return out


def read_json(path: str, option: str, error: type[Exception]) -> Any:
    """The JSON file ``path`` given to ``option``; ``error`` naming both when unreadable or not JSON."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise error(f"{option}: cannot read {path!r} ({exc.strerror or exc})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise error(f"{option}: {path!r} is not valid JSON ({exc})") from None


__all__ = ["read_json", "whole_numbers"]


def option_words(exc: Exception, options: dict[str, str]) -> str:
    """An input error's words with its field named as the option that sets it: ``"--routing: unknown policy ..."``
    when ``exc.field`` (a :class:`~simulator.base.errors.FieldError`'s) is in ``options`` (field -> option); else
    the error's words as they are. The field is the error's own, never read back out of its words."""
    field = exc.field if isinstance(exc, FieldError) else None
    if field in options:
        return f"{options[field]}: {exc.message}"
    return str(exc)
