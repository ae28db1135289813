"""The one input-error type: messages and the paths of the fields they are about.

Every error about input, wherever it is raised (the simulator's specs, workloads, configurations, tiers, clusters,
searches, calibrations, launches, JSON; the planner's services and definitions; the catalog's profiles), is a
:class:`FieldError`. It carries ``field`` (a dotted path such as ``"engine.max_num_seqs"`` or
``"requests[3].prompt_len"``; None when the problem is not one field's) and ``message`` (the words, without the
path); ``str(exc)`` is ``"field: message"``, as printed by the CLI. ``errors`` holds every problem as
``{path: [messages]}`` (``"non_field_errors"`` for the input as a whole): one for an error raised at one field,
several for one made with :meth:`FieldError.many` after a whole definition was checked. ``not_found`` marks a
reference to something the user may not see (404, not 400).

The API maps it once to a 400 (or 404) with ``errors`` (``planner.api.errors``); pages attach ``errors`` to their
form fields; neither reads a field back out of the words. The planner's ``InputError`` is this type with the
planner's constructor (messages per field).
"""

from __future__ import annotations

#: The key of the messages that are about the input as a whole.
NON_FIELD = "non_field_errors"


class FieldError(ValueError):
    """Input that cannot be used; ``field`` is the path of the field it is about (None: the input as a whole)."""

    def __init__(self, message: str, *, field: str | None = None, not_found: bool = False) -> None:
        path = None if field is None or field == "" else str(field)
        super().__init__(f"{path}: {message}" if path is not None else message)
        self.field, self.message = path, message
        self.not_found = not_found
        #: Messages per field path: this error's one, or every problem of a definition (:meth:`many`).
        self.errors: dict[str, list[str]] = {path if path is not None else NON_FIELD: [message]}

    @classmethod
    def many(cls, errors: dict[str, list[str]], *, not_found: bool = False) -> FieldError:
        """One error holding every problem found: ``errors`` maps a field path to its messages. ``field`` and
        ``message`` are the first problem's; ``str()`` lists them all ("path: words; path: words")."""
        first, messages = next(iter(errors.items()), (None, [""]))
        exc = cls.__new__(cls)
        FieldError.__init__(exc, " ".join(messages), field=None if first == NON_FIELD else first, not_found=not_found)
        exc.args = ("; ".join(f"{k}: {' '.join(v)}" for k, v in errors.items()),)
        exc.errors = errors
        return exc

    @property
    def status_code(self) -> int:
        """404 for a reference to something the user may not see, else 400."""
        return 404 if self.not_found else 400

    @classmethod
    def nested(cls, exc: Exception, prefix: str, *, join: str = ".") -> FieldError:
        """``exc`` as this type one level down: its field becomes ``prefix + join + field`` (a :class:`FieldError`
        with a field), else ``prefix`` with ``exc``'s words."""
        if isinstance(exc, FieldError):
            return cls(exc.message, field=f"{prefix}{join}{exc.field}" if exc.field else prefix)
        return cls(str(exc), field=prefix)
