"""The suite's budget switch: CI's full budget, or a quarter of it in a quick local run.

``KVP_HYPOTHESIS_BUDGET=full`` (``.ci/run``) runs every property test with its own ``max_examples``
(``tests/conftest.py`` scales them otherwise) and every random-case equality test over all its seeds.
``python3 dev.py test`` runs the equality tests over the ``local`` seeds each names: about a quarter of
them, always the same ones (a local failure reproduces), chosen so that what a test checks was taken
on them too (a shortcut, a shared run). CI runs them all, so no seed goes unchecked before a merge.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

FULL = os.environ.get("KVP_HYPOTHESIS_BUDGET", "") == "full"
#: A quick local run's share of the examples and seeds: one in this many.
SHARE = 4


def seeds(full: Iterable[int], local: Iterable[int]) -> list[int]:
    """All of ``full`` with the full budget, else ``local`` (a subset of ``full``)."""
    full, local = list(full), list(local)
    assert set(local) <= set(full) and local, f"local seeds {local} are not a subset of {full}"
    return full if FULL else local
