"""The waiting loop ``manage.py sweep create --wait`` and ``manage.py dayplan create --wait`` share."""

from __future__ import annotations

import pytest
from django.core.management.base import CommandError

from planner.management import job_commands


class Job:
    def __init__(self, done_after: int) -> None:
        self.reads, self.done_after, self.status = 0, done_after, "running"


def test_it_shows_progress_until_the_job_is_finished(monkeypatch):
    monkeypatch.setattr(job_commands, "POLL_S", 0.0)
    job = Job(3)

    def show(j):
        j.reads += 1

    job_commands.wait_for(job, show=show, finished=lambda j: j.reads >= j.done_after, timeout=60, what="sweep 7")
    assert job.reads == 3


def test_past_its_timeout_it_stops_waiting_and_says_the_job_goes_on(monkeypatch):
    monkeypatch.setattr(job_commands, "POLL_S", 0.01)
    with pytest.raises(CommandError, match=r"day plan 9 still running after 0.05 s \(it goes on\)"):
        job_commands.wait_for(Job(10**9), show=lambda j: None, finished=lambda j: False, timeout=0.05,
                              what="day plan 9")
