"""A calibration made in a web request (``POST /api/calibrations/``, the ``/calibrations/`` form): fitted in the
request when its fit is priced within ``KVP_INLINE_MAX_SECONDS``, else sent to a worker as a run
(:mod:`planner.runs`), which calls :func:`planner.calibration.services.fit_on_worker`."""

from __future__ import annotations

from planner.calibration.services import fit_and_store, prepare_calibration
from planner.runs.api import hand_over
from planner.runs.services import runs_inline


def calibration_or_run(request, fields: dict):
    """The stored profile (fitted here), or a :class:`planner.runs.models.Run` (sent to a worker).

    ``fields``: those of :func:`planner.calibration.services.prepare_calibration`. Raises ``ValidationError`` or
    the one input error (:class:`simulator.base.errors.FieldError`: :class:`simulator.batch.OverBudget`,
    :class:`planner.jobs.QuotaExceeded`).
    """
    prepared = prepare_calibration(request.user, **fields)
    if runs_inline(prepared["price"].seconds):
        return fit_and_store(request.user, prepared, inline=True)
    return hand_over(request, kind="calibration", definition=fields, price=prepared["price"], field="file",
                     what=f"This calibration (up to {prepared['simulations']} simulations of the measured load)",
                     advice="upload a measurement of fewer or shorter requests")
