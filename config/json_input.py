"""Checked JSON input: nesting depth, NUL characters, lone surrogates and infinite numbers refused with the field's path.

Four kinds of JSON used to end in a 500 further down the stack:

- nesting a thousand levels deep (a 6 KB body): recursive validators and
  serializers hit Python's recursion limit (``RecursionError``);
- a NUL character in a string: PostgreSQL refuses it in text (``DataError``);
- a lone UTF-16 surrogate (``"\\ud800"``): it cannot be encoded as UTF-8
  (``UnicodeEncodeError`` when stored or rendered);
- a number too large for a double (``1e999``): Python reads it as infinity, which
  PostgreSQL's jsonb refuses (``DataError``) when the value is stored verbatim.

:func:`check_json` walks a parsed value once, without recursion, and refuses all
four with the path of the field (``workload.spec.prompt``, ``axes[0].values``);
:func:`loads_checked` parses and checks text. Used by the API's parser
(``config.parsers``) and by pages that take pasted JSON (``gpuprofiles.forms``);
it lives in ``config`` so that both layers may import it.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

#: Deepest nesting accepted (objects and arrays); a Hugging Face config.json uses about 4.
MAX_JSON_DEPTH = 32

_SURROGATE = re.compile("[\ud800-\udfff]")


class JsonInputError(ValueError):
    """A parsed JSON value the service refuses; ``field`` is its path ('' for the whole body)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field, self.message = field, message


def _text_problem(text: str) -> str | None:
    if "\x00" in text:
        return "must not contain NUL (\\u0000) characters"
    if _SURROGATE.search(text):
        return "must not contain lone UTF-16 surrogates (e.g. \\ud800): they are not valid Unicode text"
    return None


def _child_path(path: str, key: Any) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def check_json(value: Any, *, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Raise :class:`JsonInputError` for nesting deeper than ``max_depth``, NUL characters, lone surrogates or a
    number that is not finite."""
    stack: list[tuple[Any, int, str]] = [(value, 0, "")]
    while stack:
        item, depth, path = stack.pop()
        if isinstance(item, str):
            problem = _text_problem(item)
            if problem:
                raise JsonInputError(path, problem)
            continue
        if isinstance(item, float) and not math.isfinite(item):
            raise JsonInputError(path, "holds a number too large for JSON (e.g. 1e999): write a finite one")
        if not isinstance(item, (dict, list)):
            continue
        if depth >= max_depth:
            raise JsonInputError(path, f"nested too deeply: at most {max_depth} levels of objects and arrays")
        if isinstance(item, dict):
            for key, child in item.items():
                problem = _text_problem(key)
                if problem:
                    raise JsonInputError(path, f"a key {problem}")
                stack.append((child, depth + 1, _child_path(path, key)))
        else:
            stack.extend((child, depth + 1, _child_path(path, i)) for i, child in enumerate(item))


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not valid JSON")


def loads_checked(text: str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads`` plus :func:`check_json`; raises ``ValueError`` (``json.JSONDecodeError`` or
    :class:`JsonInputError`) with a message for the user."""
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise JsonInputError("", f"nested too deeply: at most {max_depth} levels of objects and arrays") from None
    check_json(value, max_depth=max_depth)
    return value
