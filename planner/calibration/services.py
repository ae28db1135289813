"""Create a calibration: parse the upload, fit the clock, store the profile only if all of it worked."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q

from config.json_input import object_id
from config.strict_input import unknown_field_errors
from planner.calibration.models import CalibrationProfile
from planner.errors import field_and_message

#: Requests replayed and residual evaluations allowed per fit. It is priced first (``simulator.calibration.price_fit``):
#: within ``KVP_INLINE_MAX_SECONDS`` it runs inside the request, in a child process under the wall clock
#: (``planner.sweeps.bounded.run_bounded``), else on a worker (:mod:`planner.runs`, :mod:`planner.calibration.handover`).
FIT_MAX_REQUESTS = 300
FIT_MAX_EVALUATIONS = 20
MAX_UPLOAD_CHARS = 5_000_000
DEPLOYMENT_KNOBS = ("max_num_batched_tokens", "max_num_seqs", "max_model_len", "gpu_memory_utilization")


def _profile(kind: str, ref: Any, owner):
    from gpuprofiles.models import GpuProfile, ModelProfile

    cls = ModelProfile if kind == "model" else GpuProfile
    visible = Q(owner__isnull=True) | Q(owner=owner)
    qs = cls.objects.filter(visible)
    if isinstance(ref, bool) or not isinstance(ref, (str, int)) or str(ref).strip() == "":
        raise ValidationError({kind: [f"give a catalog slug or the id of one of your {kind} profiles"]})
    pk = object_id(ref)
    row = qs.filter(pk=pk).first() if pk is not None else qs.filter(slug=str(ref)[:200]).first()
    if row is None:
        raise ValidationError({kind: [f"no {kind} profile {ref!r} in the catalog or your profiles"]})
    return row


def _deployment(tp: Any, knobs: dict[str, Any]):
    from simulator.base import DeploymentSpec

    if isinstance(tp, bool) or not isinstance(tp, int) or not 1 <= tp <= 64:
        raise ValidationError({"tensor_parallel_size": ["must be a whole number from 1 to 64"]})
    unknown = unknown_field_errors(knobs, DEPLOYMENT_KNOBS, prefix="deployment")
    if unknown:
        raise ValidationError(unknown)
    try:
        return DeploymentSpec(tensor_parallel_size=tp, **knobs)
    except (ValueError, TypeError) as exc:
        raise ValidationError({"deployment": [str(exc)]}) from None


def _rate(value: Any) -> float | None:
    if value in (None, ""):
        return None
    try:
        rate = float(value)
    except (TypeError, ValueError):
        raise ValidationError({"request_rate": ["must be a number of requests per second"]}) from None
    if not 0 < rate <= 1e5:
        raise ValidationError({"request_rate": ["must be a rate in (0, 100000] requests per second"]})
    return rate


def _check_model(meas, model_row) -> None:
    """A file that names a model other than the one chosen is refused (its numbers belong to another model)."""
    named = (meas.model or "").strip()
    if not named:
        return
    known = {model_row.name.lower(), model_row.slug.lower(), (model_row.hf_id or "").lower()}
    tail = named.lower().rsplit("/", 1)[-1]
    if named.lower() not in known and not any(k and k.rsplit("/", 1)[-1] == tail for k in known):
        raise ValidationError({"file": [f"the file measured model {named!r}, not {model_row.name!r}"]})


def _fit(meas, model, gpu, deployment, rate):
    """The fit itself (runs in a child process: :func:`planner.sweeps.bounded.run_bounded`)."""
    from simulator.calibration import fit

    return fit(meas, model, gpu, deployment, request_rate=rate, max_requests=FIT_MAX_REQUESTS,
               max_evaluations=FIT_MAX_EVALUATIONS)


def prepare_calibration(owner, *, name: Any, model: Any, gpu: Any, text: Any, tensor_parallel_size: Any = 1,
                        file_format: str | None = None, request_rate: Any = None, deployment: dict | None = None,
                        inline: bool = True) -> dict:
    """Check the upload and parse it (``inline``: in a child process under the wall clock, else here, on a
    worker), then price its fit: ``{"name", "model_row", "gpu_row", "deployment", "meas", "rate", "price",
    "simulations"}``. Raises ``ValidationError`` with field messages (past the wall clock:
    :class:`simulator.batch.OverBudget` at ``file``)."""
    from planner.sweeps.bounded import run_bounded
    from simulator.batch.budget import fit_simulations
    from simulator.calibration import CalibrationError, parse_measurement, price_fit
    from simulator.calibration.fit import DEFAULT_FIT

    # Form and multipart bodies reach here unchecked (JSON bodies are checked by the parser): PostgreSQL
    # refuses NUL in text, which was a 500.
    for field, value in (("name", name), ("model", model), ("gpu", gpu), ("format", file_format)):
        if isinstance(value, str) and "\x00" in value:
            raise ValidationError({field: ["must not contain NUL (\\u0000) characters"]})
    if not isinstance(name, str) or not name.strip() or len(name) > 120:
        raise ValidationError({"name": ["give a name of at most 120 characters"]})
    name = name.strip()
    if CalibrationProfile.objects.filter(owner=owner, name=name).exists():
        raise ValidationError({"name": [f"you already have a calibration named {name!r}"]})
    if not isinstance(text, str) or not text.strip():
        raise ValidationError({"file": ["upload a measurement file (vllm bench JSON, request CSV or /metrics scrape)"]})
    if len(text) > MAX_UPLOAD_CHARS:
        raise ValidationError({"file": [f"at most {MAX_UPLOAD_CHARS:,} characters"]})
    model_row, gpu_row = _profile("model", model, owner), _profile("gpu", gpu, owner)
    dep = _deployment(tensor_parallel_size, dict(deployment or {}))
    rate = _rate(request_rate)
    try:  # up to MAX_UPLOAD_CHARS (5 MB of CSV: 1.5 s), so under the wall clock too
        meas = run_bounded(parse_measurement, text, file_format or None, what="Reading this measurement file",
                           field="file", advice="upload a smaller file") if inline else \
            parse_measurement(text, file_format or None)
    except CalibrationError as exc:  # (past the wall clock: OverBudget at the file, the one input error)
        raise ValidationError({"file": [str(exc)]}) from None
    _check_model(meas, model_row)
    price = price_fit(meas, model_row.to_spec(), gpu_row.to_spec(), dep, request_rate=rate,
                      max_requests=FIT_MAX_REQUESTS, max_evaluations=FIT_MAX_EVALUATIONS)
    return {"name": name, "model_row": model_row, "gpu_row": gpu_row, "deployment": dep, "meas": meas, "rate": rate,
            "price": price, "simulations": fit_simulations(len(DEFAULT_FIT), FIT_MAX_EVALUATIONS)}


def fit_and_store(owner, prepared: dict, *, inline: bool) -> CalibrationProfile:
    """Fit what :func:`prepare_calibration` returned (``inline``: in a child process under the wall clock, after
    the synchronous price check; else here, on a worker) and store the profile. Raises ``ValidationError``, or
    :class:`simulator.batch.OverBudget` at ``file`` (priced over a limit, or stopped at one)."""
    from planner.sweeps.bounded import run_bounded
    from planner.sweeps.limits import check_calibration
    from simulator.batch.budget import OverBudget
    from simulator.calibration import CalibrationError

    meas, dep, rate = prepared["meas"], prepared["deployment"], prepared["rate"]
    specs = (meas, prepared["model_row"].to_spec(), prepared["gpu_row"].to_spec(), dep)
    try:
        if inline:
            check_calibration(prepared["price"], prepared["simulations"])
            result = run_bounded(_fit, *specs, rate, what="This calibration", field="file",
                                 advice="upload a measurement of fewer or shorter requests")
        else:
            result = _fit(*specs, rate)
    except OverBudget:  # priced over a limit, or stopped past the wall clock / memory limit: the one input error
        raise
    except CalibrationError as exc:
        field, message = field_and_message(exc)
        raise ValidationError({field or "file": [message]}) from None
    except ValueError as exc:  # CostModelError / SpecError: the deployment has no roofline clock
        raise ValidationError({"gpu": [f"no roofline clock for this deployment: {exc}"]}) from None
    with transaction.atomic():
        return CalibrationProfile.objects.create(
            owner=owner, name=prepared["name"], model=prepared["model_row"], gpu=prepared["gpu_row"],
            tensor_parallel_size=dep.tensor_parallel_size, deployment={k: getattr(dep, k) for k in DEPLOYMENT_KNOBS},
            source_format=meas.source, measurement=meas.to_dict(), coefficients=result.coefficients,
            fit=result.to_dict())


def create_calibration(owner, **fields: Any) -> CalibrationProfile:
    """Parse the upload, fit the clock of ``model`` on ``gpu`` at the given TP, store and return the profile, all
    in this request (``fields``: those of :func:`prepare_calibration`). Raises ``ValidationError`` with field
    messages (nothing is stored then)."""
    return fit_and_store(owner, prepare_calibration(owner, **fields), inline=True)


def calibration_dict(row: CalibrationProfile) -> dict:
    """A stored calibration as the API answers it (``GET``, and the answer to ``POST``)."""
    return {"id": row.id, "name": row.name, "model": row.model.slug, "gpu": row.gpu.slug,
            "tensor_parallel_size": row.tensor_parallel_size, "deployment": row.deployment,
            "source_format": row.source_format, "measurement": row.measurement, "coefficients": row.coefficients,
            "fit": row.fit, "created_at": row.created_at.isoformat()}


def fit_on_worker(fields: dict, *, owner) -> dict:
    """A calibration sent to a worker (:mod:`planner.calibration.handover`): checked, parsed, priced against the
    chunk limit and fitted here; returns the API's answer to a ``POST`` (:func:`calibration_dict`)."""
    from planner.sweeps.limits import chunk_max_seconds, run_max_bytes
    from simulator.batch.budget import check

    prepared = prepare_calibration(owner, **fields, inline=False)
    check(prepared["price"], max_bytes=run_max_bytes(), max_seconds=chunk_max_seconds(), field="file",
          what="This calibration", advice="upload a measurement of fewer or shorter requests")
    return calibration_dict(fit_and_store(owner, prepared, inline=False))


def calibration_for(owner, ref: Any) -> tuple[dict, list[str]] | None:
    """``(coefficients, names the fit moved)`` of the owner's calibration ``ref`` (id or name), or None."""
    qs = CalibrationProfile.objects.filter(owner=owner) if getattr(owner, "is_authenticated", False) else \
        CalibrationProfile.objects.none()
    pk = object_id(ref)
    row = qs.filter(pk=pk).first() if pk is not None else qs.filter(name=str(ref)[:200]).first()
    return None if row is None else (dict(row.coefficients), sorted((row.fit or {}).get("fitted") or {}))
