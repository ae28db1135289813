"""The planner's one input-error type, raised by its services and definitions.

Every place that refuses what a user asked for (sizing knobs, a sweep or
simulation definition, a replicas search, a profile slug nobody may use)
raises :class:`InputError` with messages per field. Pages attach them to
their form fields with :func:`config.form_errors.attach_errors`; the API answers them in the shape of
:mod:`planner.api.errors` (``{"errors": {field: [messages]}}``), with status
400, or 404 when the input names a profile the user may not see: an unknown
slug and another user's private profile get the same answer, so a private
profile cannot be read, planned with or even detected by anyone else.
"""

from __future__ import annotations

from simulator.base.errors import FieldError


class InputError(FieldError):
    """Input the planner cannot use: the one input-error type (:class:`simulator.base.errors.FieldError`) made from
    messages per field, as the planner's checks collect them; ``errors`` maps a field path to its messages.

    ``not_found`` marks a reference to a profile that does not exist for this
    user (status 404 in the API); any other problem is a 400.
    """

    def __init__(self, errors: dict[str, list[str]], *, not_found: bool = False):
        made = FieldError.many(errors, not_found=not_found)
        super().__init__(made.message, field=made.field, not_found=not_found)
        self.args, self.errors = made.args, errors

    @classmethod
    def one(cls, field_name: str, message: str, *, not_found: bool = False) -> InputError:
        return cls({field_name: [message]}, not_found=not_found)


def field_and_message(exc: Exception) -> tuple[str | None, str]:
    """The field path and the words of an input error: ``exc.field`` and ``exc.message`` of a
    :class:`simulator.base.errors.FieldError` that names one field; any other error (or one holding several
    fields' problems) names none (``(None, its words)``): no field is read back out of a message."""
    if isinstance(exc, FieldError) and exc.field and len(exc.errors) == 1:
        return exc.field, exc.message
    return None, str(exc)


class FieldErrors:
    """Collects messages per field while a definition is checked, then raises them as one :class:`InputError`.

    Checking goes on after the first problem so that a user sees every problem of a definition at once.
    """

    def __init__(self) -> None:
        self.errors: dict[str, list[str]] = {}
        self.not_found = False

    def add(self, field: str, message: str, *, not_found: bool = False) -> None:
        self.errors.setdefault(field, []).append(message)
        self.not_found |= not_found

    def unknown(self, data, known, prefix: str = "") -> None:
        """Add a message for each key of ``data`` not in ``known`` (:func:`config.strict_input.unknown_field_errors`:
        the closest known name, the known ones)."""
        from config.strict_input import unknown_field_errors

        for field, messages in unknown_field_errors(data, known, prefix=prefix).items():
            self.add(field, messages[0])

    def add_from(self, prefix: str, exc: Exception) -> None:
        """Add ``exc``'s message under ``prefix``, or under ``prefix.field`` when it is a :class:`FieldError` naming
        ``field``."""
        field, message = field_and_message(exc)
        self.add(f"{prefix}.{field}" if field else prefix, message)

    def merge(self, exc: FieldError) -> None:
        """Add every problem of an input error at its own path (``exc.errors``)."""
        for field, messages in exc.errors.items():
            for message in messages:
                self.add(field, message, not_found=exc.not_found)

    def raise_if_any(self) -> None:
        if self.errors:
            raise InputError(self.errors, not_found=self.not_found)


def every_problem(attempt, values: dict, *, reset, tries: int = 8):
    """``attempt(values)``, or one :class:`InputError` holding every problem, not only the first.

    A check that stops at its first problem (a spec's ``__post_init__``, a service refusing one knob) is
    run again with each refused field given a neutral value by ``reset(values, field)`` (it returns False
    when that field cannot be reset, e.g. the model itself), until the check passes or nothing more can be
    reset; each field keeps the first message it got. ``values`` is not changed.
    """
    values = dict(values)
    errors: dict[str, list[str]] = {}
    not_found = False
    for _ in range(tries):
        try:
            out = attempt(values)
        except InputError as exc:
            not_found |= exc.not_found
            for name, messages in exc.errors.items():
                errors.setdefault(name, list(messages))
            if not [name for name in exc.errors if reset(values, name)]:
                break
            continue
        if not errors:
            return out
        break
    raise InputError(errors, not_found=not_found)
