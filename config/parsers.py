"""A JSON body parser that refuses what the rest of the stack cannot hold, as a 400 naming the field.

DRF's ``JSONParser`` accepts any JSON. Three kinds of valid JSON used to end
in a 500 further down:

- nesting a thousand levels deep (a 6 KB body): recursive validators and
  serializers hit Python's recursion limit (``RecursionError``);
- a NUL character in a string: PostgreSQL refuses it in text (``DataError``);
- a lone UTF-16 surrogate (``"\\ud800"``): it cannot be encoded as UTF-8
  (``UnicodeEncodeError`` when stored or rendered).

:func:`config.json_input.check_json` walks the parsed value once, without
recursion, and refuses all three with the path of the field
(``workload.spec.prompt``, ``axes[0].values``). A body of more than
:data:`config.json_input.MAX_JSON_VALUES` values is refused before it is parsed (counted at C speed: a 5 MB body of
2,600,000 numbers took 1.5-2.4 s of CPU to parse and check).
"""

from __future__ import annotations

from django.conf import settings
from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.parsers import JSONParser

from config.json_input import MAX_JSON_DEPTH, MAX_JSON_VALUES, JsonInputError, check_json, loads_checked

__all__ = ["CheckedJSONParser", "MAX_JSON_DEPTH", "check_json", "loads_checked"]

class CheckedJSONParser(JSONParser):
    """DRF's JSON parser with :func:`check_json`: a 400 in the error shape, never a 500."""

    def parse(self, stream, media_type=None, parser_context=None):
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            text = stream.read().decode(encoding) if stream is not None else ""
        except UnicodeDecodeError as exc:
            raise ParseError(f"JSON parse error - the body is not valid {encoding}: {exc.reason}") from None
        try:
            return loads_checked(text, max_values=MAX_JSON_VALUES)
        except JsonInputError as exc:
            raise ValidationError({exc.field or "non_field_errors": [exc.message]}) from None
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
