"""The actions a chunked job's management command offers (``manage.py sweep`` and ``manage.py dayplan``):
``create FILE --user U [--wait|--inline] [--csv OUT]``, ``status ID``, ``cancel ID``, ``csv ID [-o OUT]``."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from django.core.management.base import CommandError

#: Seconds between two reads of a job's progress while a command waits for it.
POLL_S = 1.0


def add_job_actions(parser: argparse.ArgumentParser, *, noun: str, body: str, id_name: str,
                    csv_what: str) -> argparse.ArgumentParser:
    """Add the four actions to ``parser`` and return the ``create`` parser (for options of one job kind).

    ``noun``: "sweep", "day plan"; ``body``: the API body it takes ("the POST /api/sweeps/ body");
    ``id_name``: the id argument's name; ``csv_what``: what the CSV holds ("the report's CSV")."""
    sub = parser.add_subparsers(dest="action", required=True, metavar="{create,status,cancel,csv}")
    create = sub.add_parser("create", help=f"create a {noun} ({body})")
    create.add_argument("definition", help="JSON file, or '-' for stdin")
    create.add_argument("--user", required=True, help="the owner")
    how = create.add_mutually_exclusive_group()
    how.add_argument("--wait", action="store_true", help="wait for the workers, with a progress bar on a terminal")
    how.add_argument("--inline", action="store_true", help="run the chunks in this process (no worker needed)")
    create.add_argument("--csv", metavar="OUT", help=f"write {csv_what} as CSV there when done ('-' for stdout)")
    create.add_argument("--timeout", type=float, default=3600.0,
                        help="seconds to wait at most with --wait (default: 3600)")
    status = sub.add_parser("status", help=f"progress of a {noun}, as JSON")
    status.add_argument(id_name, type=int)
    cancel = sub.add_parser("cancel", help=f"cancel a queued or running {noun}")
    cancel.add_argument(id_name, type=int)
    csv = sub.add_parser("csv", help=f"the finished {noun}'s {csv_what.removeprefix('the ')} as CSV")
    csv.add_argument(id_name, type=int)
    csv.add_argument("-o", "--output", default="-", help="file ('-' for stdout, the default)")
    return create


def wait_for(job, *, show: Callable, finished: Callable, timeout: float, what: str) -> None:
    """Show ``job``'s progress every :data:`POLL_S` seconds until ``finished(job)``; after ``timeout`` seconds a
    :class:`CommandError` says the job goes on (the command stops waiting, the workers do not)."""
    deadline = time.monotonic() + timeout
    while True:
        show(job)
        if finished(job):
            return
        if time.monotonic() > deadline:
            raise CommandError(f"{what} still {job.status} after {timeout:g} s (it goes on)")
        time.sleep(POLL_S)


__all__ = ["POLL_S", "add_job_actions", "wait_for"]
