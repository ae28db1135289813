"""``manage.py issue_token USERNAME [--name NAME]``: print a new API token for a user."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from accounts.services import api_token_create
from simulator.base.errors import FieldError


class Command(BaseCommand):
    help = "Create a named API token for USERNAME and print it (only the token, on stdout)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="token name (default: 'cli YYYY-mm-dd HH:MM:SS')")
        parser.add_argument("--create-user", action="store_true", help="create the user (unusable password) if missing")

    def handle(self, *args, username: str, name: str, create_user: bool, **options):
        User = get_user_model()
        try:
            user = User.objects.get(username=username)
        except User.DoesNotExist:
            if not create_user:
                raise CommandError(f"no user named {username!r} (add --create-user to create one)") from None
            user = User(username=username)
            user.set_unusable_password()
            user.save()
            self.stderr.write(f"created user {username!r} (no password; sign in with a token only)")
        name = name or f"cli {timezone.now():%Y-%m-%d %H:%M:%S}"
        try:
            token, raw = api_token_create(user=user, name=name)
        except FieldError as exc:
            raise CommandError(exc.message) from None
        self.stderr.write(f"token {token.name!r} for {username}: send it as 'Authorization: Token <token>'")
        self.stdout.write(raw)
