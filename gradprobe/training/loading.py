"""What a training run is made of, loaded from its config: the policy (``[model]``), gradient
checkpointing, and the task (``[task]``), as :mod:`gradprobe.training.run` and a study's preflight
(:mod:`gradprobe.study.preflight`) load them (both re-exported by :mod:`gradprobe.training.run`).
"""

from __future__ import annotations

from ..models import load_policy
from ..tasks import load_task
from .specs import PlanError

__all__ = ["load_run_policy", "enable_gradient_checkpointing", "load_run_task"]


def load_run_policy(model_spec, *, seed: int = 0):
    """:func:`gradprobe.models.load_policy` for a plan's ``[model]`` (its tier aliases included: ``tiny`` is
    the warm-started tier's folder, :func:`gradprobe.tiers.tier_path`).

    Raises
    ------
    ModelNotFoundError
        ``tiny`` without a built tier (a :class:`gradprobe.tiers.TierNotBuiltError`; the message says
        ``run `gradprobe warmstart --tier tiny```), or an unknown model.
    """
    return load_policy(model_spec.name, dtype=model_spec.dtype, device=model_spec.device, seed=seed)


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
