"""Input rules shared by the API, the sweep definitions and the pages.

``block_size``: vLLM accepts only a fixed set of KV block sizes; the rule lives with the deployment spec
(:func:`simulator.base.specs.block_size_problem`, re-exported here for the sweep definitions). A block size vLLM
would refuse at start-up is refused here too, so that no plan or sweep describes an engine that cannot run.

Context length (:func:`context_problems`): a ``max_model_len`` beyond the model's positions, and a request
longer than ``max_model_len``, are refused by sizing, the deployment search and the replicas search alike.
"""

from __future__ import annotations

from simulator.base.specs import VLLM_BLOCK_SIZES, block_size_problem


def context_problems(*, model_name: str, max_positions: int | None, max_model_len: int | None,
                     longest: int | None = None) -> dict[str, str]:
    """What vLLM refuses about a deployment's context and its requests' lengths: one rule for every door.

    vLLM refuses at start-up a ``max_model_len`` beyond the model's positions (``max_position_embeddings``;
    ``vllm/config/model.py``, ``_get_and_verify_max_len``), and answers 400 to a request whose prompt plus
    output is longer than ``max_model_len`` (which defaults to those positions). Sizing, the deployment
    search, the replicas page and their API refuse the same, each at its own field.

    Returns ``{"max_model_len": message}`` for the first problem and ``{"request": message}`` for the second
    (``longest``: the longest request's prompt plus output, in tokens; None when not known); empty when
    nothing is refused. The caller puts each message at its field.
    """
    out: dict[str, str] = {}
    if max_model_len is not None and max_positions and max_model_len > max_positions:
        out["max_model_len"] = (f"{max_model_len:,} tokens is beyond {model_name}'s {max_positions:,} positions "
                                "(max_position_embeddings); vLLM refuses it")
    if longest is None:
        return out
    if max_model_len is not None and "max_model_len" not in out:
        if longest > max_model_len:
            out["request"] = (f"the longest request ({longest:,} tokens, prompt + output) is longer than "
                              f"max_model_len ({max_model_len:,} tokens); vLLM refuses it")
    elif max_positions and longest > max_positions:
        out["request"] = (f"the longest request ({longest:,} tokens, prompt + output) is longer than "
                          f"{model_name}'s {max_positions:,} positions (max_position_embeddings, its longest "
                          "max_model_len); vLLM refuses it")
    return out


__all__ = ["VLLM_BLOCK_SIZES", "block_size_problem", "context_problems"]
