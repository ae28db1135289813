"""``manage.py sweep``: create, watch, cancel and export sweeps without HTTP.

The same services as ``/api/sweeps/``:

- ``sweep create FILE --user NAME [--wait | --inline] [--csv OUT]``: validate the
  definition (the body of ``POST /api/sweeps/``, ``-`` for stdin) and store the sweep
  with :func:`planner.sweeps.services.sweep_create`, which hands its chunks to the
  Celery workers once the transaction commits. ``--wait`` then polls its progress (a
  progress bar on stderr when it is a terminal) until it is finished; ``--inline`` runs the chunks in this
  process instead, through the very functions the workers call
  (:func:`~planner.sweeps.services.chunk_run`, :func:`~planner.sweeps.services.cliff_run`;
  both idempotent, so the queued messages find them done and return).
- ``sweep status ID``: the progress object of ``GET /api/sweeps/{id}/``, as JSON.
- ``sweep cancel ID``: :func:`~planner.sweeps.services.sweep_cancel` as the owner.
- ``sweep csv ID [-o OUT]``: the finished sweep's report as CSV (``?format=csv``).

Exit status: 0 when the sweep is created (or done, with ``--wait``/``--inline``); 1 for a bad
definition (messages per field in the API's error shape on stderr), or a sweep that
failed or was cancelled while waiting.
"""

from __future__ import annotations

import contextlib
import json
import sys

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from config.json_input import loads_checked
from planner.api.errors import _as_field_errors
from planner.management.job_commands import add_job_actions, wait_for
from planner.models import Report, Sweep
from planner.sweeps import exports, selectors, services
from simulator.base.errors import FieldError


class Command(BaseCommand):
    help = "Create, watch, cancel and export sweeps through the sweep services (no HTTP)."

    def add_arguments(self, parser):
        add_job_actions(parser, noun="sweep", body="from a definition: the POST /api/sweeps/ body", id_name="sweep_id",
                        csv_what="the report")

    def handle(self, *args, action: str, **opts):
        self.stderr.style_func = None  # progress and notes on stderr are not errors: no red
        return getattr(self, f"_{action}")(**opts)

    # ------------------------------------------------------------------ actions

    def _create(self, *, definition: str, user: str, wait: bool, inline: bool, csv: str | None, timeout: float, **_):
        owner = get_user_model().objects.filter(username=user).first()
        if owner is None:
            raise CommandError(f"no user named {user!r} (create one: manage.py issue_token {user} --create-user)")
        body = _read_json(definition)
        try:
            sweep = services.sweep_create(owner=owner, definition=body)
        except FieldError as exc:  # the definition's problems, or a point or cliff search over a limit
            self.stderr.write(json.dumps({"errors": _as_field_errors(exc.errors)}, indent=2))
            raise CommandError("bad sweep definition (see the messages above)", returncode=1) from None
        self.stderr.write(f"sweep {sweep.pk} created: {sweep.name!r}, {sweep.total_points} points ({sweep.mode})")
        self.stdout.write(str(sweep.pk))
        if inline:
            self._run_inline(sweep)
        elif wait:
            self._wait(sweep, timeout=timeout)
        else:
            return
        sweep.refresh_from_db()
        if sweep.status != Sweep.Status.DONE:
            raise CommandError(f"sweep {sweep.pk} ended {sweep.status}: {sweep.error or 'no error recorded'}")
        report = Report.objects.filter(sweep=sweep).first()
        if report is not None:
            self.stderr.write(f"report: /reports/{report.slug}/")
        if csv:
            self._write_csv(sweep, csv)

    def _status(self, *, sweep_id: int, **_):
        sweep = _sweep(sweep_id)
        report = Report.objects.filter(sweep=sweep).first()
        out = {
            "id": sweep.pk,
            "name": sweep.name,
            "owner": sweep.owner.get_username(),
            "mode": sweep.mode,
            "status": sweep.status,
            "progress": selectors.sweep_progress(sweep=sweep),
            "report": f"/reports/{report.slug}/" if report else None,
        }
        self.stdout.write(json.dumps(out, indent=2, default=str))

    def _cancel(self, *, sweep_id: int, **_):
        sweep = _sweep(sweep_id)
        sweep = services.sweep_cancel(sweep=sweep, user=sweep.owner)
        self.stdout.write(f"sweep {sweep.pk}: {sweep.status}")

    def _csv(self, *, sweep_id: int, output: str, **_):
        self._write_csv(_sweep(sweep_id), output)

    # ------------------------------------------------------------------ helpers

    def _run_inline(self, sweep: Sweep) -> None:
        with self._progress_bar(sweep) as show:
            if sweep.mode == Sweep.Mode.CLIFF:
                show(sweep, "finding the cliff")
                services.cliff_run(sweep_id=sweep.pk)
            else:
                for index in range(sweep.num_chunks):
                    show(sweep)
                    services.chunk_run(sweep_id=sweep.pk, index=index)
            show(sweep)

    def _wait(self, sweep: Sweep, *, timeout: float) -> None:
        with self._progress_bar(sweep) as show:
            wait_for(sweep, show=show, finished=lambda s: s.is_final, timeout=timeout, what=f"sweep {sweep.pk}")

    @contextlib.contextmanager
    def _progress_bar(self, sweep: Sweep):
        """Yields ``show(sweep)``: a progress bar (tqdm) on a terminal, nothing otherwise; one summary line at the end."""
        bar = None
        if sys.stderr.isatty():
            from tqdm import tqdm

            bar = tqdm(total=sweep.total_points, desc=f"sweep {sweep.pk}", unit="point", file=sys.stderr,
                       bar_format="{desc}: {n_fmt}/{total_fmt} points |{bar}| {elapsed} elapsed{postfix}")
        last: dict = {}

        def show(sweep: Sweep, note: str = "") -> None:
            sweep.refresh_from_db()
            last.update(selectors.sweep_progress(sweep=sweep))
            if bar is not None:
                eta = f", about {last['eta_s']:.0f} s left" if last.get("eta_s") is not None else ""
                bar.n = last["points_done"]
                bar.set_postfix_str(f"{note or last['status']}{eta}")

        try:
            yield show
        finally:
            if bar is not None:
                bar.close()
            if last:
                self.stderr.write(f"sweep {sweep.pk}: {last['status']}, {last['points_done']}/{last['points_total']} "
                                  f"points in {last['elapsed_s']:.0f} s")

    def _write_csv(self, sweep: Sweep, output: str) -> None:
        report = Report.objects.filter(sweep=sweep).first()
        if report is None:
            raise CommandError(f"sweep {sweep.pk} has no report yet (status: {sweep.status})")
        text = exports.to_csv(report.snapshot)
        if output == "-":
            self.stdout.write(text, ending="")
        else:
            with open(output, "w", encoding="utf-8", newline="") as fh:
                fh.write(text)
            self.stderr.write(f"wrote {output}")


def _read_json(path: str):
    try:
        text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()
        return loads_checked(text)  # the API body's checks
    except (OSError, ValueError) as exc:
        raise CommandError(f"cannot read the JSON definition: {exc}") from None


def _sweep(sweep_id: int) -> Sweep:
    sweep = Sweep.objects.select_related("owner").filter(pk=sweep_id).first()
    if sweep is None:
        raise CommandError(f"no sweep {sweep_id}")
    return sweep
