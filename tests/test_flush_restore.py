"""tests/flush_restore.py: a flush in the suite leaves the content types and permissions that Django's
``post_migrate`` handlers write, and still sends the signal when another receiver listens."""

from __future__ import annotations

import pytest
from django.core.management import call_command, sql

from tests import flush_restore


def _flush(**kw) -> None:
    call_command("flush", verbosity=0, interactive=False, **kw)


@pytest.mark.django_db(transaction=True)
def test_a_flush_puts_back_the_rows_the_post_migrate_handlers_write():
    from django.contrib.auth import get_user_model
    from django.contrib.contenttypes.models import ContentType

    _flush()
    _flush()  # the second one, at least, puts the noted rows back
    assert "default" in flush_restore._ROWS
    put_back = flush_restore.written_rows("default")
    _flush(inhibit_post_migrate=True)
    assert flush_restore.written_rows("default") == ([], [])
    sql.emit_post_migrate_signal(0, False, "default")  # what Django's own flush would have done
    ContentType.objects.clear_cache()
    written = flush_restore.written_rows("default")
    assert put_back == written and len(written[0]) > 10 and len(written[1]) >= 4 * len(written[0])
    _flush()
    user_type = ContentType.objects.get_for_model(get_user_model())  # no id cached from the deleted rows
    assert ContentType.objects.filter(pk=user_type.pk, model="user").exists()


@pytest.mark.django_db(transaction=True)
def test_another_receiver_gets_the_signal_after_a_flush():
    from django.db.models.signals import post_migrate

    heard = []

    def receiver(sender, **kwargs):
        heard.append(sender.label)

    post_migrate.connect(receiver)
    try:
        _flush()
    finally:
        post_migrate.disconnect(receiver)
    assert "auth" in heard and "planner" in heard
    assert flush_restore.written_rows("default")[1], "the stock handlers ran too"
