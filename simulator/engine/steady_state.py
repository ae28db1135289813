"""Is the run in a steady state at its end, or is its queue still growing? (an overloaded deployment).

>>> g = queue_growth(arrival, first_token_time)  # doctest: +SKIP
>>> g.growing, g.rate_per_s                       # doctest: +SKIP

A deployment that cannot keep up with its traffic builds a queue that grows for as long as the traffic lasts:
a short run can still meet a latency target while a longer one of the same rate misses it by any margin. The
check: the requests *waiting for their first token* (arrived, no first token yet; one that never got one waits
to the end), counted at :data:`POINTS` evenly spaced times over the second half of the arrivals (from the
median arrival to the last), and the least-squares slope of that count over time. The queue **grows** when the
slope is more than :data:`GROWTH_SHARE` of the arrival rate over that half (the deployment serves less than
95 % of what arrives) and the count at the last arrival is at least :data:`MIN_BACKLOG` requests above the
count at the median one. Fewer than :data:`MIN_REQUESTS` arrivals in the second half, or no time between its
ends: not judged (None).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Times the waiting count is read at over the second half of the arrivals.
POINTS = 21
#: Net growth, as a share of the arrival rate, above which the queue counts as growing.
GROWTH_SHARE = 0.05
#: Least rise of the waiting count over the second half for it to count as growing, requests.
MIN_BACKLOG = 10
#: Least arrivals in the second half for a verdict.
MIN_REQUESTS = 50


@dataclass(frozen=True)
class QueueGrowth:
    """The waiting count's trend over the second half of the arrivals."""

    rate_per_s: float  # requests/s: the slope of the waiting count
    arrival_rate_per_s: float  # requests/s over the same span
    waiting_at_median: int  # requests
    waiting_at_end: int  # requests
    span_s: float  # s: median arrival to last arrival
    growing: bool

    def words(self) -> str:
        return (f"the queue is still growing at the end of the traffic: +{self.rate_per_s:,.2f} requests/s waiting "
                f"over its second half ({self.waiting_at_median:,} to {self.waiting_at_end:,} waiting in "
                f"{self.span_s:,.0f} s, {self.rate_per_s / self.arrival_rate_per_s:.0%} of the arrivals): "
                "overloaded, a longer run would miss by more")

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def queue_growth(arrival, first_token_time) -> QueueGrowth | None:
    """The trend of the requests waiting for a first token over the second half of the arrivals (module
    docstring); None when there are too few arrivals to judge."""
    arr = np.sort(np.asarray(arrival, np.float64))
    first = np.asarray(first_token_time, np.float64)
    first = np.sort(np.where(np.isnan(first), np.inf, first))
    if arr.size < 2 * MIN_REQUESTS:
        return None
    t0, t1 = float(np.median(arr)), float(arr[-1])
    late = int(np.sum(arr >= t0))
    if t1 <= t0 or late < MIN_REQUESTS:
        return None
    t = np.linspace(t0, t1, POINTS)
    waiting = np.searchsorted(arr, t, side="right") - np.searchsorted(first, t, side="right")
    slope = float(np.polyfit(t - t0, waiting.astype(np.float64), 1)[0])
    rate = late / (t1 - t0)
    grows = slope > GROWTH_SHARE * rate and int(waiting[-1]) - int(waiting[0]) >= MIN_BACKLOG
    return QueueGrowth(slope, rate, int(waiting[0]), int(waiting[-1]), t1 - t0, bool(grows))


__all__ = ["GROWTH_SHARE", "MIN_BACKLOG", "MIN_REQUESTS", "POINTS", "QueueGrowth", "queue_growth"]
