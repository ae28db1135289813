"""What every part shares: the plain spec objects of a model, a GPU and a deployment, the sampler paths,
how numbers are printed, and the engine configuration's shared pieces.

- :mod:`~simulator.base.specs`: :class:`ModelSpec`, :class:`GpuSpec`, :class:`DeploymentSpec` (frozen, validated;
  :class:`SpecError` names the field), dtype sizes.
- :mod:`~simulator.base.sampling`: vLLM's sampler paths, their measured GPU time, a model's default path.
- :mod:`~simulator.base.readable`: one rule for printing figures and milliseconds.
- :mod:`~simulator.base.json_input`: :func:`loads_checked`, the depth, text and number checks of every JSON input
  (API bodies, traces, measurements).
- :mod:`~simulator.base.errors`: :class:`FieldError`, the one input-error type (``field`` path, ``message``);
  every error of the simulator about its input derives from it.
- :mod:`~simulator.base.config_base`: :class:`ConfigError`, :class:`StepTimeModel`, :func:`unknown_field`,
  :func:`unknown_message` (the one wording of an unknown field, with the closest known name).

May import: nothing else of simulator.
"""

from simulator.base.config_base import ConfigError, StepTimeModel, closest_name, unknown_field, unknown_message
from simulator.base.errors import FieldError
from simulator.base.readable import figure, milliseconds, ms_against, ms_figure, ms_target
from simulator.base.sampling import (
    DEFAULT_SAMPLER_PATH,
    PATH_WORDS,
    SAMPLER_FIELDS,
    SAMPLER_PATHS,
    SAMPLING_KEYS,
    generation_config_path,
    generation_defaults,
    model_sampler_path,
    path_words,
    timed_path,
)
from simulator.base.specs import (
    DRIVER_RESERVED_GIB,
    DTYPE_BYTES,
    GIB,
    GPU_MEASURED_FIELDS,
    KV_CACHE_DTYPES,
    LAYER_FULL,
    LAYER_LINEAR,
    LAYER_SLIDING,
    MAX_LAYERS,
    DeploymentSpec,
    GpuSpec,
    LayerSpec,
    ModelSpec,
    SpecError,
    check_measured,
    normalize_dtype,
)

__all__ = ["ConfigError", "DEFAULT_SAMPLER_PATH", "DRIVER_RESERVED_GIB", "DTYPE_BYTES", "DeploymentSpec", "FieldError", "GIB", "GPU_MEASURED_FIELDS", "GpuSpec", "KV_CACHE_DTYPES", "LAYER_FULL", "LAYER_LINEAR", "LAYER_SLIDING", "LayerSpec", "MAX_LAYERS", "ModelSpec", "PATH_WORDS", "SAMPLER_FIELDS", "SAMPLER_PATHS", "SAMPLING_KEYS", "SpecError", "StepTimeModel", "check_measured", "closest_name", "figure", "generation_config_path", "generation_defaults", "milliseconds", "model_sampler_path", "ms_against", "ms_figure", "ms_target", "normalize_dtype", "path_words", "timed_path", "unknown_field", "unknown_message"]
