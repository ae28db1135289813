"""The "Calibration" select of the forms that time a deployment with the roofline clock (replicas, sweeps,
searches): the signed-in user's calibrations (``/calibrations/``), blank for the model's own clock.

Before, a calibration could be used only by typing ``"calibration": <id>`` into a JSON definition (issue 33
item 8). The forms keep their declarations: a page adds the select with :func:`attach` and puts the chosen
calibration into the definition with :func:`into`; the definition's own check
(:func:`planner.sweeps.sections.parse_calibration`) then applies it as for the API.
"""

from __future__ import annotations

from typing import Any

from django import forms

from config.json_input import object_id
from planner.calibration.models import CalibrationProfile

NONE_LABEL = "None: the model's own roofline clock"
HELP = ("One of your calibrations (fitted on your measurements at /calibrations/): its coefficients replace the "
        "roofline clock's defaults. Fitted for one model on one GPU at one TP: it fits that deployment best.")


def calibration_choices(user) -> list[tuple[str, str]]:
    """``[("", none), (id, "name — model on TP× GPU"), ...]``: the user's calibrations, newest first."""
    choices = [("", NONE_LABEL)]
    if getattr(user, "is_authenticated", False):
        rows = CalibrationProfile.objects.filter(owner=user).select_related("model", "gpu")
        choices += [(str(r.pk), f"{r.name} — {r.model.name} on {r.tensor_parallel_size}× {r.gpu.name}") for r in rows]
    return choices


def attach(form: forms.Form, user, *, name: str = "calibration") -> None:
    """Add the select to ``form`` (before it is validated) when the user has a calibration to choose."""
    choices = calibration_choices(user)
    if len(choices) == 1:
        return  # nothing to choose: the page links to /calibrations/ instead
    form.fields[name] = forms.ChoiceField(
        label="Calibration", required=False, choices=choices, initial="", help_text=HELP,
        error_messages={"invalid_choice": "Choose one of your calibrations (or none): %(value)s is not one."})


def chosen(form: forms.Form, *, name: str = "calibration") -> int | None:
    """The id of the calibration the form's select names, or None (none chosen, or no select)."""
    value = (getattr(form, "cleaned_data", None) or {}).get(name)
    return int(value) if value else None


def into(definition: dict[str, Any], form: forms.Form) -> dict[str, Any]:
    """``definition`` with the chosen calibration (``"calibration": id``), unchanged when none is chosen."""
    ref = chosen(form)
    return {**definition, "calibration": ref} if ref is not None else definition


def calibration_on(owner, ref: Any) -> dict | None:
    """The owner's calibration ``ref`` (an id or a name) as a deployment search applies it: ``{"id", "name",
    "model", "gpu", "tensor_parallel_size", "coefficients", "fitted"}`` (model and GPU by name), or None."""
    if isinstance(ref, bool) or not isinstance(ref, (int, str)) or not getattr(owner, "is_authenticated", False):
        return None
    rows = CalibrationProfile.objects.filter(owner=owner).select_related("model", "gpu")
    pk = object_id(ref)
    row = rows.filter(pk=pk).first() if pk is not None else rows.filter(name=str(ref)[:200]).first()
    if row is None:
        return None
    return {"id": row.pk, "name": row.name, "model": row.model.name, "gpu": row.gpu.name,
            "tensor_parallel_size": row.tensor_parallel_size, "coefficients": dict(row.coefficients),
            "fitted": sorted((row.fit or {}).get("fitted") or {})}


def name_of(user, ref) -> str | None:
    """The name of the user's calibration ``ref`` (an id), for the pages that say which clock timed them."""
    if ref is None or not getattr(user, "is_authenticated", False):
        return None
    row = CalibrationProfile.objects.filter(owner=user, pk=ref).only("name").first()
    return row.name if row else None
