"""Django's database session store, refusing malformed session keys before the query.

A session cookie is client input. Django's ``db`` backend looks any cookie value up as
it is; on PostgreSQL a value with a NUL byte makes that lookup raise ``DataError``, a 500
on every page and API call that reads ``request.user`` (found by the schema fuzz). Django
itself only issues keys of 32 lowercase letters and digits, so anything else is treated
like an unknown key: no session (signed out), and a fresh key if one is saved.

Enabled with ``SESSION_ENGINE = "accounts.sessions"``.
"""

from __future__ import annotations

from django.contrib.sessions.backends.base import VALID_KEY_CHARS
from django.contrib.sessions.backends.db import SessionStore as DbSessionStore

_VALID = frozenset(VALID_KEY_CHARS)
MAX_KEY_LENGTH = 40  # django_session.session_key is a varchar(40)


def is_well_formed(key) -> bool:
    return isinstance(key, str) and 8 <= len(key) <= MAX_KEY_LENGTH and _VALID.issuperset(key)


class SessionStore(DbSessionStore):
    def _validate_session_key(self, key):
        return is_well_formed(key)

    def _get_session_from_db(self):
        if not is_well_formed(self.session_key):
            self._session_key = None
            return None
        return super()._get_session_from_db()

    async def _aget_session_from_db(self):
        if not is_well_formed(self.session_key):
            self._session_key = None
            return None
        return await super()._aget_session_from_db()
