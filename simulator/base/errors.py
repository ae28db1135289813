"""The one input-error type of the simulator: a message and the path of the field it is about.

Every error the simulator raises about its input (specs, workloads, configurations, tiers, clusters, searches,
calibrations, launches, JSON) is a :class:`FieldError`. It carries ``field`` (a dotted path such as
``"engine.max_num_seqs"`` or ``"requests[3].prompt_len"``; None when the problem is not one field's) and
``message`` (the words, without the path); ``str(exc)`` is ``"field: message"``, as printed by the CLI.
The planner attaches ``field`` to a form field or an API error key (:func:`planner.errors.field_and_message`)
without reading it back out of the words.
"""

from __future__ import annotations


class FieldError(ValueError):
    """Input that cannot be used; ``field`` is the path of the field it is about (None: the input as a whole)."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        path = None if field is None or field == "" else str(field)
        super().__init__(f"{path}: {message}" if path is not None else message)
        self.field, self.message = path, message

    @classmethod
    def nested(cls, exc: Exception, prefix: str, *, join: str = ".") -> FieldError:
        """``exc`` as this type one level down: its field becomes ``prefix + join + field`` (a :class:`FieldError`
        with a field), else ``prefix`` with ``exc``'s words."""
        if isinstance(exc, FieldError):
            return cls(exc.message, field=f"{prefix}{join}{exc.field}" if exc.field else prefix)
        return cls(str(exc), field=prefix)
