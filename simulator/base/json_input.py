"""Checked JSON input: nesting depth, NUL characters, lone surrogates and out-of-range numbers refused with the field's path.

Five kinds of JSON used to end in a 500 further down the stack:

- nesting a thousand levels deep (a 6 KB body): recursive validators and
  serializers hit Python's recursion limit (``RecursionError``);
- a NUL character in a string: PostgreSQL refuses it in text (``DataError``);
- a lone UTF-16 surrogate (``"\\ud800"``): it cannot be encoded as UTF-8
  (``UnicodeEncodeError`` when stored or rendered);
- a number too large for a double (``1e999``): Python reads it as infinity, which
  PostgreSQL's jsonb refuses (``DataError``) when the value is stored verbatim;
- a whole number of thousands of digits: Python refuses to read past 4,300 digits (``ValueError``),
  and one under that overflows wherever it becomes a float or a 64-bit integer (``OverflowError``).

:func:`check_json` walks a parsed value once, without recursion, and refuses all
five with the path of the field (``workload.spec.prompt``, ``axes[0].values``);
:func:`loads_checked` parses and checks text. The same checks for every JSON the service reads: the
API's bodies (``config.parsers``), the JSON inside their string fields (a JSONL trace, a calibration's
text, a calibration's ``deployment`` sent as text), and pages that take pasted JSON
(``gpuprofiles.forms``, the sweep and calibration forms through the same services). It lives in
``simulator.base`` (pure Python) so that the simulator's trace and measurement parsers use it too;
``config.json_input`` is the name the web layers import it by.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from simulator.base.errors import FieldError

#: Deepest nesting accepted (objects and arrays); a Hugging Face config.json uses about 4.
MAX_JSON_DEPTH = 32
#: Largest whole number accepted (exclusive): what a 64-bit integer holds; more digits than 20 are refused
#: while parsing, before Python converts them.
MAX_JSON_INT = 2**64
MAX_INT_DIGITS = 20

#: Most JSON values (numbers, strings, keys, arrays, objects) a request body may hold. Parsing and checking cost
#: about 1 us a value: a 5 MB body of 2,600,000 numbers took 1.5-2.4 s of a web worker's CPU (4.9-6.4 s on the
#: loaded VM) before its 400. Long text (a trace, a measurement) is one string value, whatever its size.
MAX_JSON_VALUES = 100_000

_SURROGATE = re.compile("[\ud800-\udfff]")
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')


class JsonInputError(FieldError):
    """A parsed JSON value the service refuses; ``field`` is its path ('' for the whole body)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message, field=field or None)
        self.field = field


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
        if item is _TOO_LONG_VALUE or (isinstance(item, int) and not isinstance(item, bool)
                                       and abs(item) >= MAX_JSON_INT):
            raise JsonInputError(path, _TOO_LONG)
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


_TOO_LONG = f"holds a whole number too large (at most {MAX_INT_DIGITS} digits, below 2**64)"


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not valid JSON")


class _TooLong:
    """What a whole number of more than :data:`MAX_INT_DIGITS` digits parses to: :func:`check_json` names its field."""


_TOO_LONG_VALUE = _TooLong()


def _int(text: str) -> int | _TooLong:
    return _TOO_LONG_VALUE if len(text.lstrip("-")) > MAX_INT_DIGITS else int(text)


def count_values(text: str, *, limit: int) -> int:
    """How many JSON values ``text`` holds, at most (commas, ``[`` and ``{`` outside strings, plus one), counted at
    C speed before anything is parsed; exact enough to compare with ``limit``: a count over it is taken again
    without the strings' contents (a trace's commas), and a text of more strings than ``limit`` is over it."""
    fast = text.count(",") + text.count("[") + text.count("{") + 1
    if fast <= limit:
        return fast
    strings = (text.count('"') - text.count('\\"')) // 2
    if strings > limit:
        return strings
    bare = _STRING.sub("", text)
    return bare.count(",") + bare.count("[") + bare.count("{") + 1


def loads_checked(text: str, *, max_depth: int = MAX_JSON_DEPTH, max_values: int | None = None) -> Any:
    """``json.loads`` plus :func:`check_json`; raises ``ValueError`` (``json.JSONDecodeError`` or
    :class:`JsonInputError`) with a message for the user. ``max_values``: refuse, before parsing, a text of
    more JSON values (:func:`count_values`)."""
    if max_values is not None:
        found = count_values(text, limit=max_values)
        if found > max_values:
            raise JsonInputError("", f"holds about {found:,} JSON values (numbers, strings, keys, lists, objects); "
                                     f"at most {max_values:,} are accepted (long text, such as a trace, is one "
                                     "string)")
    try:
        value = json.loads(text, parse_constant=_refuse_constant, parse_int=_int)
    except RecursionError:
        raise JsonInputError("", f"nested too deeply: at most {max_depth} levels of objects and arrays") from None
    check_json(value, max_depth=max_depth)
    return value


def finite_number(text: str) -> float:
    """A number typed as text (a form's sweep-axis value, a request rate), under the checks a JSON body's
    numbers pass: finite (``1e999`` and a 5,000-digit number are refused, not read as infinity); raises
    ``ValueError`` with a message for the user."""
    cleaned = text.strip().replace("_", "")
    if len(cleaned) > 100:
        raise ValueError(f"{cleaned[:20]}...: not a number of at most 100 characters")
    value = float(cleaned)  # ValueError for what is not a number
    if not math.isfinite(value):
        raise ValueError(f"{cleaned}: a number too large (or not finite); write a finite one")
    return value
