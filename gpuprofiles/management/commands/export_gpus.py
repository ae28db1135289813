"""``manage.py export_gpus [--name NAME ...] [--out FILE]``: the catalog's GPUs as the JSON list
``python -m simulator search --gpus`` reads, so the command line times and sizes them as the pages and the API
do (``examples/search_gpus.json`` is this command's output; a test keeps them equal)."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from gpuprofiles.models import GpuProfile
from gpuprofiles.selectors import visible_profiles
from simulator.base import GpuSpec

#: GpuSpec fields left out of the file where they hold their default (the file stays short and readable).
_DEFAULTS = {f.name: f.default for f in fields(GpuSpec)}


def gpu_json(profile: GpuProfile) -> dict:
    """One catalog GPU as ``GpuSpec(**d)`` takes it, fields at their default left out."""
    spec = profile.to_spec()
    return {f.name: getattr(spec, f.name) for f in fields(GpuSpec)
            if f.name == "name" or getattr(spec, f.name) not in (None, _DEFAULTS.get(f.name))}


def gpus_file_text(names: list[str] | None) -> str:
    """The JSON list (one GPU a line) of the catalog GPUs ``names`` in that order, or every priced one by name."""
    rows = visible_profiles(GpuProfile, user=None, scope="catalog")
    if names:
        by_name = {g.name: g for g in rows.filter(name__in=names)}
        missing = [n for n in names if n not in by_name]
        if missing:
            known = ", ".join(sorted(rows.values_list("name", flat=True)))
            raise CommandError(f"--name: no catalog GPU named {missing[0]!r} (known: {known})")
        chosen = [by_name[n] for n in names]
    else:
        chosen = list(rows.filter(price_per_hour__isnull=False).order_by("name"))
    lines = [json.dumps(gpu_json(g), separators=(", ", ": ")) for g in chosen]
    return "[\n  " + ",\n  ".join(lines) + "\n]\n"


class Command(BaseCommand):
    help = ("Write the catalog's GPUs (every priced one, or those named) as the JSON list "
            "'python -m simulator search --gpus' reads.")

    def add_arguments(self, parser):
        parser.add_argument("--name", action="append", metavar="NAME",
                            help="a catalog GPU's name (repeatable; the file keeps this order); default: every "
                                 "priced catalog GPU")
        parser.add_argument("--out", metavar="FILE", help="write here instead of stdout")

    def handle(self, *args, name: list[str] | None, out: str | None, **options):
        text = gpus_file_text(name)
        if out:
            try:
                Path(out).write_text(text, encoding="utf-8")
            except OSError as exc:
                raise CommandError(f"--out {out!r}: cannot write ({exc.strerror or exc})") from None
        else:
            self.stdout.write(text, ending="")
