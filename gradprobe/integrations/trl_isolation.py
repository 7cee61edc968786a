"""Leaving a TRL training run untouched while the probe runs inside it.

:class:`~gradprobe.integrations.trl.GradprobeCallback` probes the trainer's own model between
optimizer steps. The probe must not change what training does next, so around it:

- :func:`without_checkpointing` turns gradient checkpointing and the input-embedding
  ``requires_grad_`` hook off (``torch.func.jvp`` refuses the hook) and back on;
- :func:`rng_state` / :func:`set_rng_state` save and restore every random generator the trainer
  draws from (torch CPU and CUDA, ``random``, numpy), so the rollouts after a probe are the ones
  training would have drawn without it.
"""

from __future__ import annotations

import contextlib
import random

import numpy as np
import torch

__all__ = ["without_checkpointing", "rng_state", "set_rng_state"]

_INPUT_GRAD_HOOK = "make_inputs_require_grads"  # transformers' PreTrainedModel.enable_input_require_grads


def _is_checkpointing(model) -> bool:
    """Whether gradient (activation) checkpointing is on, under either transformers API."""
    return bool(getattr(model, "is_activation_checkpointing", None)
                if hasattr(model, "is_activation_checkpointing")
                else getattr(model, "is_gradient_checkpointing", False))


@contextlib.contextmanager
def without_checkpointing(model, checkpointing_kwargs):
    """Gradient checkpointing and the input-embedding ``requires_grad_`` hook off for the probe.

    The trainer turns them on (``gradient_checkpointing`` is TRL's default); the hook calls
    ``requires_grad_`` inside the forward pass, which ``torch.func.jvp`` refuses. Both are restored,
    as TRL's own ``unwrap_model_for_generation`` does for generation.
    """
    checkpointing = _is_checkpointing(model)
    new_api = hasattr(model, "activation_checkpointing_enable")  # transformers >= 5 (the old names warn)
    if checkpointing:
        (model.activation_checkpointing_disable if new_api else model.gradient_checkpointing_disable)()
    # the embedding hook ``make_inputs_require_grads`` (enable_input_require_grads), wherever registered
    saved = [(m, key, hook) for m in model.modules() for key, hook in list(m._forward_hooks.items())
             if getattr(hook, "__name__", "") == _INPUT_GRAD_HOOK]
    for m, key, _ in saved:
        del m._forward_hooks[key]
    try:
        yield
    finally:
        if checkpointing:  # (reentrant checkpointing re-adds its input hook itself)
            if new_api:
                model.activation_checkpointing_enable(activation_checkpointing_kwargs=checkpointing_kwargs)
            else:
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=checkpointing_kwargs)
        for m, key, hook in saved:
            if not any(getattr(h, "__name__", "") == _INPUT_GRAD_HOOK for h in m._forward_hooks.values()):
                m._forward_hooks[key] = hook


def rng_state() -> dict:
    """Every random generator's state: torch CPU, ``random``, numpy, and CUDA once initialised."""
    state = {"torch": torch.get_rng_state(), "random": random.getstate(), "numpy": np.random.get_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    """Restore what :func:`rng_state` saved."""
    torch.set_rng_state(state["torch"])
    random.setstate(state["random"])
    np.random.set_state(state["numpy"])
    if "cuda" in state:
        torch.cuda.set_rng_state_all(state["cuda"])
