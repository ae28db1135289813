"""Deployment search: the cheapest deployment whose latency meets an SLO at a traffic.

:class:`SearchSpace` and :class:`Slo` (:mod:`~simulator.search.space`), sizing and judging each candidate
(:mod:`~simulator.search.evaluate`), the search itself (:func:`search_deployments`) and the xPyD splits of
its answer (:func:`xpyd_alternatives`), and prefill and decode pools of their own shapes searched jointly
(:func:`search_pools`).

May import: simulator.base, simulator.sizing, simulator.clock, simulator.speculative, simulator.workload, simulator.engine, simulator.cluster, simulator.batch.
"""

from simulator.search.deployments import Outcome, SearchCancelled, merge_results, search_deployments
from simulator.search.disaggregated import split_counts, xpyd_alternatives
from simulator.search.evaluate import default_max_model_len, prepare_candidate
from simulator.search.pools import pools_verdict, search_pools
from simulator.search.seeds import (
    DEFAULT_SEED_COUNT,
    MAX_SEEDS,
    SeedCheck,
    check_seeds,
    other_seeds,
    seed_check_words,
    seed_count,
)
from simulator.search.space import (
    DURATION_BOUNDS_S,
    PRECISIONS,
    SLO_METRIC_LABELS,
    TRAFFIC_DEFAULTS,
    SearchError,
    SearchSpace,
    Slo,
    SloTarget,
    check_space_for_model,
    default_duration,
    format_seconds,
    parse_slo_target,
    requests_for_percentile,
    space_defaults,
)

__all__ = ["DEFAULT_SEED_COUNT", "DURATION_BOUNDS_S", "default_duration", "requests_for_percentile", "MAX_SEEDS", "Outcome", "SeedCheck", "check_seeds", "other_seeds", "seed_check_words", "seed_count", "PRECISIONS", "SLO_METRIC_LABELS", "TRAFFIC_DEFAULTS", "check_space_for_model", "SearchCancelled", "SearchError", "SearchSpace", "Slo", "SloTarget", "default_max_model_len", "format_seconds", "merge_results", "parse_slo_target", "pools_verdict", "prepare_candidate", "search_deployments", "search_pools", "space_defaults", "split_counts", "xpyd_alternatives"]
