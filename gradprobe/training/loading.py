"""What a training run is made of, loaded from its config: the policy (``[model]``), gradient
checkpointing, and the task (``[task]``), as :mod:`gradprobe.training.run` and a study's preflight
(:mod:`gradprobe.study.preflight`) load them (both re-exported by :mod:`gradprobe.training.run`).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from ..models import ModelNotFoundError, load_policy
from ..tasks import load_task
from .specs import PlanError
from .. import tiers


__all__ = ["load_run_policy", "enable_gradient_checkpointing", "load_run_task"]


def load_run_policy(model_spec, *, seed: int = 0):
    """:func:`gradprobe.models.load_policy` for a plan's ``[model]``; ``tiny`` is the tier's folder.

    Raises
    ------
    ModelNotFoundError
        ``tiny`` without a built tier (the message says ``run gradprobe warmstart --tier tiny``).
    """
    name = model_spec.name
    if name == "tiny":
        hint = "run `gradprobe warmstart --tier tiny` first"
        if importlib.util.find_spec("gradprobe.tiers") is None:
            raise ModelNotFoundError(f"model 'tiny' is the warm-started tier, which this install lacks; {hint}")

        path = Path(tiers.tier_path("tiny"))
        if not path.exists():
            raise ModelNotFoundError(f"model 'tiny': the tier is not built at {path}; {hint}")
        name = str(path)
    return load_policy(name, dtype=model_spec.dtype, device=model_spec.device, seed=seed)


def enable_gradient_checkpointing(model) -> None:
    """Recompute activations in the backward pass (``[model] gradient_checkpointing = true``).

    ``model.activation_checkpointing_enable`` (transformers >= 5.2x; the older name
    ``gradient_checkpointing_enable`` before) with non-reentrant checkpoints (PyTorch's
    recommended mode; TRL's default too), active only in training mode, so generation,
    evaluation and the probe's jvp (eval mode) are unaffected. Gradients are the same as
    without it (same operations, recomputed); it costs about one extra forward per update.

    Raises
    ------
    PlanError
        The architecture does not support gradient checkpointing (fix: set
        ``gradient_checkpointing = false`` in the plan's ``[model]``).
    """
    if not getattr(model, "supports_gradient_checkpointing", False):
        raise PlanError(f"model.gradient_checkpointing: {type(model).__name__} does not support gradient "
                        "checkpointing; set [model] gradient_checkpointing = false")
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


def load_run_task(task_spec):
    """The plan's task; reasoning-gym held-out questions are deduplicated against the pool."""
    config = dict(task_spec.config)
    if not task_spec.name.startswith("gsm8k"):
        config.setdefault("train_size", task_spec.pool)
    return load_task(task_spec.name, **config)
