"""``manage.py dayplan``: create, watch, cancel and export day plans without HTTP (docs/autoscaling.md).

The same services as ``/api/day-plans/``:

- ``dayplan create FILE --user NAME [--wait | --inline] [--csv OUT] [--json OUT]``: validate the definition
  (the body of ``POST /api/day-plans/``, ``-`` for stdin) and store the plan with
  :func:`planner.dayplans.services.dayplan_create`, which sends its first chunk to the Celery workers once
  the transaction commits (each chunk sends the next). ``--wait`` then polls until it is finished (a
  progress bar on stderr when it is a terminal); ``--inline`` runs the chunks in this process instead,
  in order, through the function the workers call (:func:`~planner.dayplans.services.chunk_run`; idempotent,
  so the queued message finds its chunk done). The answer's sentences go to stderr, the plan's id to stdout.
- ``dayplan status ID``: the progress object of ``GET /api/day-plans/{id}/``, as JSON.
- ``dayplan cancel ID``: :func:`~planner.dayplans.services.dayplan_cancel` as the owner (finished chunks kept,
  their hours answered in this process).
- ``dayplan csv ID [-o OUT]``: the answered plan's hours as CSV (``export/?format=csv``).

Exit status: 0 when the plan is created (or done, with ``--wait``/``--inline``); 1 for a bad definition
(messages per field in the API's error shape on stderr), or a plan that failed or was cancelled while waiting.
"""

from __future__ import annotations

import contextlib
import json
import sys

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from planner.api.errors import _as_field_errors
from planner.dayplans import exports, selectors, services
from planner.dayplans.models import DayPlan
from planner.errors import InputError
from planner.management.commands.sweep import _read_json
from planner.management.job_commands import add_job_actions, wait_for


class Command(BaseCommand):
    help = "Create, watch, cancel and export day plans through the day plan services (no HTTP)."

    def add_arguments(self, parser):
        create = add_job_actions(parser, noun="day plan", body="the POST /api/day-plans/ body", id_name="plan_id",
                                 csv_what="the hours")
        create.add_argument("--json", metavar="OUT", help="write the whole plan as JSON there when done")

    def handle(self, *args, action: str, **opts):
        self.stderr.style_func = None  # progress and notes on stderr are not errors: no red
        return getattr(self, f"_{action}")(**opts)

    def _create(self, *, definition: str, user: str, wait: bool, inline: bool, csv: str | None, json: str | None,
                timeout: float, **_):
        owner = get_user_model().objects.filter(username=user).first()
        if owner is None:
            raise CommandError(f"no user named {user!r} (create one: manage.py issue_token {user} --create-user)")
        try:
            plan = services.dayplan_create(owner=owner, definition=_read_json(definition))
        except InputError as exc:
            self.stderr.write(_dumps({"errors": _as_field_errors(exc.errors)}))
            raise CommandError("bad day plan definition (see the messages above)", returncode=1) from None
        self.stderr.write(f"day plan {plan.pk} created: {plan.name!r}, {plan.num_chunks} chunk"
                          f"{'s' if plan.num_chunks != 1 else ''}")
        self.stdout.write(str(plan.pk))
        if inline:
            with self._progress_bar(plan) as show:
                for index in range(plan.num_chunks):
                    show(plan)
                    services.chunk_run(plan_id=plan.pk, index=index)
                show(plan)
        elif wait:
            self._wait(plan, timeout=timeout)
        else:
            return
        plan.refresh_from_db()
        if plan.status != DayPlan.Status.DONE:
            raise CommandError(f"day plan {plan.pk} ended {plan.status}: {plan.error or 'no error recorded'}")
        self.stderr.write("; ".join(exports.answer_words(plan.answer, plan.snapshot["day"])))
        if csv:
            self._write(csv, exports.to_csv(plan))
        if json:
            self._write(json, exports.to_json(plan))

    def _status(self, *, plan_id: int, **_):
        plan = _plan(plan_id)
        self.stdout.write(_dumps({"id": plan.pk, "name": plan.name, "owner": plan.owner.get_username(),
                                  "status": plan.status, "progress": selectors.dayplan_progress(plan=plan),
                                  "page": f"/plans/day/{plan.pk}/"}))

    def _cancel(self, *, plan_id: int, **_):
        plan = _plan(plan_id)
        plan = services.dayplan_cancel(plan=plan, user=plan.owner)
        services.plan_answer(plan_id=plan.pk)  # the finished chunks' hours now, worker or not (idempotent)
        self.stdout.write(f"day plan {plan.pk}: {plan.status}")

    def _csv(self, *, plan_id: int, output: str, **_):
        plan = _plan(plan_id)
        if not plan.answer:
            raise CommandError(f"day plan {plan.pk} has no answer yet (status: {plan.status})")
        self._write(output, exports.to_csv(plan))

    def _wait(self, plan: DayPlan, *, timeout: float) -> None:
        with self._progress_bar(plan) as show:
            wait_for(plan, show=show, timeout=timeout, what=f"day plan {plan.pk}",
                     finished=lambda p: p.is_final and bool(p.answer or p.status != DayPlan.Status.DONE))

    @contextlib.contextmanager
    def _progress_bar(self, plan: DayPlan):
        """Yields ``show(plan)``: a progress bar (tqdm) on a terminal, nothing otherwise; one line at the end."""
        bar = None
        if sys.stderr.isatty():
            from tqdm import tqdm

            bar = tqdm(total=plan.num_chunks, desc=f"day plan {plan.pk}", unit="chunk", file=sys.stderr,
                       bar_format="{desc}: {n_fmt}/{total_fmt} chunks |{bar}| {elapsed} elapsed{postfix}")
        last: dict = {}

        def show(plan: DayPlan) -> None:
            plan.refresh_from_db()
            last.update(selectors.dayplan_progress(plan=plan))
            if bar is not None:
                bar.n = last["chunks_done"]
                bar.set_postfix_str(f"{last['hours_done']:.1f} of {last['hours_total']:.1f} h, {last['status']}")

        try:
            yield show
        finally:
            if bar is not None:
                bar.close()
            if last:
                self.stderr.write(f"day plan {plan.pk}: {last['status']}, {last['chunks_done']}/{last['chunks_total']} "
                                  f"chunks ({last['hours_done']:.2f} h of traffic) in {last['elapsed_s'] or 0:.0f} s")

    def _write(self, output: str, text: str) -> None:
        if output == "-":
            self.stdout.write(text, ending="")
            return
        with open(output, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        self.stderr.write(f"wrote {output}")


def _dumps(data) -> str:
    return json.dumps(data, indent=2, default=str)


def _plan(plan_id: int) -> DayPlan:
    plan = DayPlan.objects.select_related("owner").filter(pk=plan_id).first()
    if plan is None:
        raise CommandError(f"no day plan {plan_id}")
    return plan
