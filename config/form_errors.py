"""Input errors shown on a page's form: the one function every form and view attaches them with.

An input error (:class:`simulator.base.errors.FieldError`, the planner's ``InputError`` among them), a Django
``ValidationError`` or a plain ``{path: [messages]}`` dict says what is wrong per field path
(``"deployment.tensor_parallel_size"``, ``"non_field_errors"``). :func:`attach_errors` puts each message on the form
field that path is about, found in the tables the form declares, never in the words of a message:

1. ``where``: a path's own field (an exact path -> field; a field of ``None`` is the top of the form);
2. ``by_name``: a path that is the name of one of the form's fields is that field's;
3. ``prefixes``: ``(prefix, field)`` pairs, the first whose prefix is the path or starts it (followed by ``.``
   or ``[``) wins;
4. else ``default`` (the top of the form when None). A field the form does not have is the default too.

One rule for all: a field that already shows its own error keeps only that one (the definition's message about
it was caused by the value that error refused; ``also`` names fields that take both), and a message already
shown where it lands is not added twice. ``paths`` says when the path is put in front of the words: ``"top"``
(only at the top of the form), ``"foreign"`` (wherever the path is not the field's own: at the top, or at a
field found by prefix or by default), ``"never"``; ``non_field_errors`` is never written out. ``words`` turns a
message into what the page shows (``words(message, field)``, field None at the top).

The API maps the same errors once to 400 answers (``planner.api.errors``); a page and the API name the same paths.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from django.core.exceptions import NON_FIELD_ERRORS, ValidationError

from simulator.base.errors import NON_FIELD, FieldError

#: Paths about the input as a whole (the simulator's and planner's, Django's): never written in front of words.
WHOLE = (NON_FIELD, NON_FIELD_ERRORS)


def errors_of(exc) -> dict[str, list[str]]:
    """``{path: [messages]}`` of an input error, a Django ``ValidationError`` or such a dict itself."""
    if isinstance(exc, FieldError):
        return exc.errors
    if isinstance(exc, ValidationError):
        return exc.message_dict if hasattr(exc, "error_dict") else {NON_FIELD: exc.messages}
    return dict(exc)


def field_for(form, path: str, *, where: Mapping[str, str | None] | None = None, by_name: bool = False,
              prefixes: Iterable[tuple[str, str]] = (), default: str | None = None) -> tuple[str | None, bool]:
    """The form field ``path`` is shown at (None: the top of the form), and whether it is the path's own
    (found in ``where`` or by name, not by prefix or by default)."""
    if where and path in where:
        field, own = where[path], True
    elif by_name and path in form.fields:
        field, own = path, True
    else:
        field = next((f for p, f in prefixes if path == p or (path.startswith(p) and path[len(p)] in ".[")),
                     default)
        own = False
    if field is not None and field not in form.fields:
        field, own = default if default in form.fields else None, False
    return field, own


def attach_errors(form, exc, *, where: Mapping[str, str | None] | None = None, by_name: bool = False,
                  prefixes: Iterable[tuple[str, str]] = (), default: str | None = None, paths: str = "top",
                  words: Callable[[str, str | None], str] | None = None, also: Iterable[str] = ()) -> None:
    """Put every message of ``exc`` (:func:`errors_of`) on the form field its path is about (the module's
    docstring says how a field is found, and the one rule of a field that shows its own error)."""
    prefixes, also = tuple(prefixes), set(also)
    for path, messages in errors_of(exc).items():
        field, own = field_for(form, path, where=where, by_name=by_name, prefixes=prefixes, default=default)
        if field is not None and field in form.errors and field not in also:
            continue  # its own error says it already
        for message in messages:
            shown = words(message, field) if words else message
            if path not in WHOLE and (paths == "foreign" and not own or paths == "top" and field is None):
                shown = f"{path}: {shown}"
            if shown not in form.errors.get(field or NON_FIELD_ERRORS, ()):
                form.add_error(field, shown)


def capitalized(message: str, field: str | None = None) -> str:
    """The words with a capital first letter (a ``words`` for :func:`attach_errors`)."""
    return message[:1].upper() + message[1:]
