"""The rows Django's ``post_migrate`` handlers write after every flush, put back with one insert per table.

pytest-django empties the database after each transactional test (every live-server browser test, every
worker test) with ``manage.py flush``, which then sends ``post_migrate`` to every app: contenttypes and auth
look up and write a content type per model and four permissions per model again, one app at a time (about
0.4 s of queries a flush, against 0.02 s for the flush itself, on SQLite on this machine). When those two
handlers are the signal's only receivers, the first flush of a process sends the signal as Django does and
notes the rows it wrote; every later flush inserts the same rows (new ids, as the handlers would give them)
in one insert per table. With any other receiver (an app added later) the signal is sent as before.
``tests/test_flush_restore.py`` checks that the rows put back are the ones the handlers write.
"""

from __future__ import annotations

import weakref

#: Per database alias: ``(content types as (app_label, model), permissions as (name, codename, app_label, model))``.
_ROWS: dict[str, tuple[list[tuple], list[tuple]]] = {}


def _only_the_stock_receivers() -> bool:
    """Whether ``post_migrate``'s receivers are exactly contenttypes' and auth's handlers."""
    from django.contrib.auth.management import create_permissions
    from django.contrib.contenttypes.management import create_contenttypes
    from django.db.models.signals import post_migrate

    found = set()
    for entry in post_migrate.receivers:
        receiver = entry[1]
        found.add(receiver() if isinstance(receiver, weakref.ReferenceType) else receiver)
    return found == {create_permissions, create_contenttypes}


def written_rows(using: str) -> tuple[list[tuple], list[tuple]]:
    """The content types and permissions in the database, in a comparable order."""
    from django.contrib.auth.models import Permission
    from django.contrib.contenttypes.models import ContentType

    types = sorted(ContentType.objects.using(using).values_list("app_label", "model"))
    perms = sorted(Permission.objects.using(using).values_list(
        "name", "codename", "content_type__app_label", "content_type__model"))
    return types, perms


def put_back(using: str) -> None:
    """Insert the noted rows into the emptied tables (content types first, then their permissions)."""
    from django.contrib.auth.models import Permission
    from django.contrib.contenttypes.models import ContentType
    from django.db import transaction

    types, perms = _ROWS[using]
    with transaction.atomic(using=using):
        ContentType.objects.using(using).bulk_create([ContentType(app_label=a, model=m) for a, m in types])
        ids = {(a, m): pk for pk, a, m in ContentType.objects.using(using).values_list("pk", "app_label", "model")}
        Permission.objects.using(using).bulk_create(
            [Permission(name=n, codename=c, content_type_id=ids[(a, m)]) for n, c, a, m in perms])
    ContentType.objects.clear_cache()  # as create_contenttypes does: cached ids are the deleted rows'


def emit_post_migrate_signal(verbosity, interactive, db, **kwargs):
    """What ``flush`` calls after emptying the tables: the signal the first time (rows noted), the rows after."""
    from django.core.management import sql

    if not _only_the_stock_receivers():
        return sql.emit_post_migrate_signal(verbosity, interactive, db, **kwargs)
    if db not in _ROWS:
        sql.emit_post_migrate_signal(verbosity, interactive, db, **kwargs)
        _ROWS[db] = written_rows(db)
        return None
    put_back(db)
    return None


def install() -> None:
    """Make ``manage.py flush`` (as pytest-django calls it) use :func:`emit_post_migrate_signal`."""
    from django.core.management.commands import flush

    flush.emit_post_migrate_signal = emit_post_migrate_signal
