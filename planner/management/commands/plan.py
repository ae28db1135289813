"""``manage.py plan``: size one deployment without HTTP, through the sizing service.

Takes the same input as ``POST /api/plan/`` — as options, or as a JSON body with
``--json FILE`` (``-`` for stdin) — validates it with the API's own input serializer,
resolves the model and GPU the same way and shapes the answer in the same function
(:func:`planner.api.sizing.plan_answer`), then prints that JSON answer (or, with
``--summary``, its one-line summary).

Exit status: 0 on success (also for a plan that does not fit: see ``fits``), 1 for bad
input, with the messages per field in the API's error shape on stderr.
"""

from __future__ import annotations

import json
import sys

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.core.management.base import BaseCommand, CommandError
from rest_framework.exceptions import ValidationError

from config.json_input import loads_checked
from planner.api.errors import _as_field_errors
from planner.api.sizing import plan_answer
from planner.errors import InputError

#: Options that map one to one onto fields of the POST /api/plan/ body.
FIELDS = {
    "tensor_parallel_size": int,
    "pipeline_parallel_size": int,
    "data_parallel_size": int,
    "num_gpus": int,
    "dtype": str,
    "kv_cache_dtype": str,
    "block_size": int,
    "gpu_memory_utilization": float,
    "max_model_len": int,
    "max_num_batched_tokens": int,
    "max_num_seqs": int,
    "vllm_version": str,
    "cpu_tier_gib": float,
    "weights_gib": float,
    "available_kv_gib": float,
    "quantization": str,
    "quant_group_size": int,
    "max_loras": int,
    "max_lora_rank": int,
}


def plan(body: dict, *, user=None) -> dict:
    """The answer of ``POST /api/plan/`` for ``body``, computed in-process by the API's own function.

    Raises ``rest_framework.exceptions.ValidationError`` or :class:`planner.errors.InputError`
    for bad input, as the API does.
    """
    return plan_answer(body, user=user or AnonymousUser())


class Command(BaseCommand):
    help = (
        "Size one deployment (same input and output as POST /api/plan/), e.g. "
        "'plan --model llama-3-1-8b --gpu h100-sxm5-80gb --max-model-len 131072'."
    )

    def add_arguments(self, parser):
        parser.add_argument("--json", metavar="FILE", help="the request body as a JSON file ('-' for stdin)")
        parser.add_argument("--model", help="catalog model slug (see GET /api/models/)")
        parser.add_argument("--gpu", help="catalog GPU slug (see GET /api/gpus/)")
        for name, kind in FIELDS.items():
            flag = "--" + name.replace("_", "-")
            parser.add_argument(flag, dest=name, type=kind, default=None)
        parser.add_argument("--tp", dest="tensor_parallel_size", type=int, help="short for --tensor-parallel-size")
        parser.add_argument("--dp", dest="data_parallel_size", type=int, help="short for --data-parallel-size")
        parser.add_argument("--enable-expert-parallel", dest="enable_expert_parallel", action="store_true",
                            default=None, help="vLLM's expert parallelism for an MoE model (EP = TP x DP)")
        parser.add_argument("--user", help="resolve the user's own profiles too (their slugs)")
        parser.add_argument("--summary", action="store_true", help="print the one-line summary, not JSON")
        parser.add_argument("--launch", action="store_true",
                            help="with --summary: also print what to run (the vllm serve line and the Kubernetes "
                                 "manifests; the JSON always carries them as \"launch\")")

    def handle(self, *args, **opts):
        body: dict = {}
        if opts["json"]:
            try:
                text = sys.stdin.read() if opts["json"] == "-" else open(opts["json"], encoding="utf-8").read()
                body = loads_checked(text)  # the API body's checks
            except (OSError, ValueError) as exc:
                raise CommandError(f"cannot read the JSON body: {exc}") from None
            if not isinstance(body, dict):
                raise CommandError("the JSON body must be an object")
        for key in ("model", "gpu", *FIELDS, "enable_expert_parallel"):
            if opts.get(key) is not None:
                body[key] = opts[key]
        user = None
        if opts["user"]:
            user = get_user_model().objects.filter(username=opts["user"]).first()
            if user is None:
                raise CommandError(f"no user named {opts['user']!r}")
        try:
            answer = plan(body, user=user)
        except (ValidationError, InputError) as exc:
            errors = exc.errors if isinstance(exc, InputError) else _as_field_errors(exc.detail)
            self.stderr.write(json.dumps({"errors": errors}, indent=2))
            raise CommandError("bad input (see the messages above)", returncode=1) from None
        if opts["summary"]:
            self.stdout.write(answer["summary"])
            if opts["launch"]:
                self.stdout.write(launch_text(answer.get("launch")))
        else:
            self.stdout.write(json.dumps(answer, indent=2))


def launch_text(launch: dict | None) -> str:
    """The command line and the manifests of an answer's ``launch``, or why there are none."""
    if not launch:
        return "Nothing to launch: the plan does not fit."
    notes = "".join(f"# {n}\n" for n in launch["notes"])
    return f"\n{launch['vllm_serve']}\n\n{notes}{launch['kubernetes']}"
