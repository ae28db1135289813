"""Unknown fields are refused, never ignored: one rule for every API body and every JSON format of ours.

A field the service does not know used to be dropped silently: ``POST /api/plan/`` with
``"data_parallel_size": 8`` answered for one GPU as if the field were not there, so a typo in a
script gave a wrong answer without a word (issue 37). Now every key that is not a field is a 400
naming it, in the API's error shape, with the closest known name when there is one::

    {"errors": {"data_parallel_size": ["unknown field; did you mean 'pipeline_parallel_size'? (known: ...)"]}}

- :func:`unknown_field_errors` is the check: ``{path: [message]}`` for each unknown key of a mapping
  (the wording, :func:`simulator.base.unknown_message`, is the simulator's too, so an unknown key deep
  in a sweep's engine or workload reads the same).
- :class:`StrictFieldsMixin` applies it to a DRF serializer's input (nested serializers that use it
  report ``parent.child`` paths through the error handler).
- :func:`refuse_unknown_fields` raises it as DRF's ``ValidationError`` for views that read a body
  without a serializer (calibrations, operations that take no fields).

Sweep, simulation, replicas and search definitions check their sections with
:meth:`planner.errors.FieldErrors.unknown`, which uses :func:`unknown_field_errors` too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rest_framework import serializers

from simulator.base import unknown_message

#: Keys a browser's form adds to a body; never a field of the API.
FORM_KEYS = frozenset({"csrfmiddlewaretoken"})


def unknown_field_errors(data: Any, known: Iterable[str], *, prefix: str = "",
                         ignore: Iterable[str] = ()) -> dict[str, list[str]]:
    """``{"prefix.key": [message]}`` for each key of ``data`` (a mapping) that is not in ``known``, sorted."""
    if not isinstance(data, Mapping):
        return {}
    names = list(dict.fromkeys(known))
    allowed = set(names) | set(ignore)
    out: dict[str, list[str]] = {}
    for key in sorted((k for k in data if k not in allowed), key=str):
        out[f"{prefix}.{key}" if prefix else str(key) or "non_field_errors"] = [unknown_message(key, names)]
    return out


def refuse_unknown_fields(data: Any, known: Iterable[str], *, prefix: str = "", ignore: Iterable[str] = ()) -> None:
    """Raise DRF's ``ValidationError`` (a 400) naming every unknown key of ``data``."""
    errors = unknown_field_errors(data, known, prefix=prefix, ignore=ignore)
    if errors:
        raise serializers.ValidationError(errors)


class StrictFieldsMixin:
    """A serializer that refuses keys it has no writable field for (with the other field errors, at once)."""

    def to_internal_value(self, data):
        known = [f.field_name for f in self._writable_fields]
        unknown = unknown_field_errors(data, known, ignore=FORM_KEYS)
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            if unknown and isinstance(exc.detail, dict):
                exc.detail.update({k: [serializers.ErrorDetail(m[0], code="unknown")] for k, m in unknown.items()})
            raise
        if unknown:
            raise serializers.ValidationError(unknown)
        return value
