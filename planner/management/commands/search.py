"""``manage.py search FILE --user NAME [--wait | --inline] [--csv OUT]``: a deployment search without HTTP.

The same services as ``POST /api/searches/``: the definition (the request body, ``-``
for stdin) is validated and stored with :func:`planner.search.services.search_create`,
which hands one chunk per GPU type to the Celery workers once the transaction commits.
``--inline`` runs the chunks in this process instead, through the very function the
workers call (:func:`planner.search.services.chunk_run`, idempotent, so the queued
messages find them done); ``--wait`` polls until the workers finish. When done it
prints the answer in words and the report's path (``/searches/r/<slug>/``).

Exit status: 0 when created (or done); 1 for a bad definition (the API's error shape on
stderr) or a search that failed or was cancelled.
"""

from __future__ import annotations

import json
import sys
import time

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from planner.search import exports, selectors, services
from planner.search.models import Search
from planner.search.seeds import seed_words
from planner.sweeps.definition import DefinitionError


class Command(BaseCommand):
    help = "Search the cheapest deployment meeting an SLO (the POST /api/searches/ body) through the services."

    def add_arguments(self, parser):
        parser.add_argument("definition", help="JSON file, or '-' for stdin")
        parser.add_argument("--user", required=True, help="the owner")
        how = parser.add_mutually_exclusive_group()
        how.add_argument("--wait", action="store_true", help="wait for the workers")
        how.add_argument("--inline", action="store_true", help="run the chunks in this process (no worker needed)")
        parser.add_argument("--csv", metavar="OUT", help="write the report's CSV there when done ('-' for stdout)")
        parser.add_argument("--launch", action="store_true",
                            help="also print what to run for the answer: the vllm serve line and the Kubernetes "
                                 "manifests")
        parser.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait at most (--wait)")

    def handle(self, *args, definition: str, user: str, wait: bool, inline: bool, csv: str | None,
               timeout: float, launch: bool = False, **opts):
        owner = get_user_model().objects.filter(username=user).first()
        if owner is None:
            raise CommandError(f"--user: no user named {user!r}")
        try:
            raw = json.load(sys.stdin if definition == "-" else open(definition, encoding="utf-8"))
        except OSError as exc:
            raise CommandError(f"definition: cannot read {definition!r} ({exc.strerror or exc})") from None
        except json.JSONDecodeError as exc:
            raise CommandError(f"definition: not valid JSON ({exc})") from None
        try:
            search = services.search_create(owner=owner, definition=raw)
        except DefinitionError as exc:
            self.stderr.write(json.dumps({"errors": exc.errors}))
            raise CommandError("the definition is invalid (messages per field above)") from None
        self.stderr.write(f"search {search.pk}: {search.total_candidates} deployment shapes in "
                          f"{search.num_chunks} chunk(s)")
        if inline:
            search = services.search_run_here(search=search)
        elif wait:
            search = self._wait(search, timeout)
        else:
            return
        if search.status != Search.Status.DONE:
            raise CommandError(f"search {search.pk} {search.status}: {search.error or 'no answer'}")
        self.stdout.write(search.result["message"])
        seeds = seed_words(search.result, search.snapshot)
        if seeds:  # as the command line's --summary says it
            self.stdout.write(f"across seeds: {seeds}")
        if "disaggregated" in search.result:
            from simulator.cli.search import disaggregated_text

            self.stdout.write(disaggregated_text(search.result["disaggregated"]).strip("\n"))
        self.stdout.write(f"report: /searches/r/{search.slug}/")
        if launch:
            from planner.management.commands.plan import launch_text

            found = (exports.result_with_launch(search) or {}).get("launch")
            self.stdout.write(launch_text(found) if found else "Nothing to launch: no deployment meets the SLO.")
        if csv:
            text = exports.to_csv(search)
            if csv == "-":
                self.stdout.write(text)
            else:
                with open(csv, "w", encoding="utf-8") as fh:
                    fh.write(text)

    def _wait(self, search: Search, timeout: float) -> Search:
        start = time.monotonic()
        while True:
            search.refresh_from_db()
            p = selectors.search_progress(search=search)
            self.stderr.write(f"{p['status']}: {p['candidates_done']}/{p['candidates_total']} shapes")
            if search.is_final:
                return search
            if time.monotonic() - start > timeout:
                raise CommandError(f"--timeout: search {search.pk} not finished after {timeout:g} s")
            time.sleep(1.0)
