"""What a training run is made of, loaded from its config: the policy (``[model]``), gradient
checkpointing, and the task (``[task]``), as :mod:`gradprobe.training.run` and a study's preflight
(:mod:`gradprobe.study.preflight`) load them (both re-exported by :mod:`gradprobe.training.run`); and
the policy's tokenizer alone (:func:`load_run_tokenizer`), for the checks a run makes before it
writes anything (:mod:`gradprobe.training.preflight`), and its context limit read from the model's config alone
(:func:`load_run_context_limit`); and a run's training pool (:func:`training_pool`).
"""

from __future__ import annotations

from ..char_tokenizer import char_tokenizer
from ..models import TIER_ALIASES, TINY_ARCHITECTURES, pretrained_source, load_policy, load_tokenizer, tiny_config
from ..rollout.base import context_limit
from ..tasks import load_task
from ..tiers import tier_path
from .specs import PlanError

__all__ = ["load_run_policy", "load_run_tokenizer", "load_run_context_limit", "enable_gradient_checkpointing",
           "load_run_task", "training_pool"]


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


def load_run_tokenizer(model_spec):
    """:func:`gradprobe.models.load_tokenizer` for a plan's ``[model]``: the tokenizer
    :func:`load_run_policy` would give, without loading the weights. Padding is not set up
    (encoding one prompt does not need it).

    Raises
    ------
    ModelNotFoundError
        As :func:`load_run_policy`: an unknown model, or ``tiny`` without a built tier (the message
        names the build command).
    OSError
        The tokenizer files cannot be read (e.g. a hub id not in the cache while offline).
    """
    return load_tokenizer(str(model_spec.name))


def load_run_context_limit(model_spec) -> int | None:
    """The context limit (tokens) the samplers of a run on ``[model]`` check prompts against
    (:func:`gradprobe.rollout.base.context_limit`: ``max_position_embeddings``), read from the model's config
    alone, without the weights: the config :func:`load_run_policy` builds (``tiny-qwen2``/``tiny-llama``) or
    reads (a tier's folder, a model folder, a GGUF file, a hub id in the cache). For the checks a run or study makes
    before the model is loaded (:func:`gradprobe.training.preflight.check_run_prompt_lengths`).

    Returns None when no limit is known: the config names none, or it cannot be read here (a missing or
    unbuilt model, a hub id not in the cache offline), which the model's own load then reports with its fix.
    """
    from transformers import AutoConfig  # heavy: deferred, as load_tokenizer defers it

    try:
        spec = str(model_spec.name)
        if spec in TIER_ALIASES:
            spec = str(tier_path(spec))
        if spec in TINY_ARCHITECTURES:
            return context_limit(tiny_config(spec, vocab_size=len(char_tokenizer())))
        source, kwargs = pretrained_source(spec, weights=False)
        extra = {"gguf_file": kwargs["gguf_file"]} if "gguf_file" in kwargs else {}
        return context_limit(AutoConfig.from_pretrained(source, trust_remote_code=False, **extra))
    except Exception:  # noqa: BLE001 - any unreadable model is the load's to report, with its own fix
        return None


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


def training_pool(task, task_spec, heldout) -> list:
    """A run's training pool: ``task.problems("train", task_spec.pool, seed=heldout.seed)``, the
    problems a plan's ``[task] pool`` and ``[heldout] seed`` give (every arm of a plan has the same
    pool). One definition for the run itself, its guidance preflight and a study's preflight.

    Raises
    ------
    Exception
        Whatever ``task.problems`` raises (e.g. a pool larger than the task's rows).
    """
    return task.problems("train", task_spec.pool, seed=heldout.seed)
