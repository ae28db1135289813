"""A day of traffic on a fleet an autoscaling policy starts and stops, and what it costs.

:func:`~simulator.day.fleet_day.simulate_day` replays a workload (arrivals in seconds) against replicas behind
a router that a policy (:mod:`simulator.autoscale`) asks for at every sync: a new replica is billed from the
moment it is asked for and takes traffic after its cold start; a replica asked to stop takes no new request
and is billed until its running and waiting requests are done; while no replica is ready, requests queue at
the router. :class:`~simulator.day.answer.DayAnswer` turns the run into GPU-hours, cost against a fleet fixed
at the peak, and SLO attainment per hour.

May import: simulator.base, simulator.workload, simulator.engine, simulator.autoscale.
"""

from simulator.day.answer import DayAnswer, HourFigures, answer_day
from simulator.day.chunks import (
    DayChunk,
    Handover,
    chunk_plans,
    default_overlap_s,
    join_chunks,
    simulate_chunk,
    simulate_day_in_chunks,
)
from simulator.day.fleet_day import MAX_PODS, ROUTINGS, DayResult, FleetSample, PodRecord, simulate_day
from simulator.day.inputs import build_policy

__all__ = ["MAX_PODS", "ROUTINGS", "DayAnswer", "DayChunk", "DayResult", "FleetSample", "Handover", "HourFigures", "PodRecord",
           "answer_day", "build_policy", "chunk_plans", "default_overlap_s", "join_chunks", "simulate_chunk", "simulate_day", "simulate_day_in_chunks"]
