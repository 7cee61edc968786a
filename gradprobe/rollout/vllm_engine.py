"""The vLLM engine behind :class:`~gradprobe.rollout.vllm_sampler.VLLMSampler`: building it from the
policy (:func:`build_engine`, :func:`export_policy`), reaching its in-process model for weight pushes,
and reading its per-token log-probabilities. ``vllm`` (an optional GPU-only extra) is imported only
inside :func:`build_engine` and :func:`default_params_factory`, so this module imports without it.
"""

from __future__ import annotations

import math
import os
import tempfile

import torch

from ..config import VLLM_FIX

__all__ = ["VLLMUnavailableError",
           "export_policy", "build_engine", "default_params_factory", "in_process_worker",
           "in_process_model", "LoadWeights", "token_logprob"]


class VLLMUnavailableError(ImportError, RuntimeError):
    """vLLM is not installed (or does not import) where an engine was asked for. An ImportError, and a
    RuntimeError so that the commands, which print a RuntimeError as one line with exit status 2, do so here."""


def export_policy(policy, folder: str | os.PathLike | None = None) -> str:
    """Write the policy's model (safetensors, config, generation config) where vLLM can load it.

    vLLM builds its own model from a folder; exporting the policy (whatever it was loaded from:
    a GGUF de-quantised by transformers, a tiny random model, a hub id) makes the engine's
    initial weights exactly the policy's. The tokenizer is not needed (the engine is built
    with ``skip_tokenizer_init=True`` and receives token ids).

    Returns
    -------
    str
        The folder.
    """
    folder = str(folder or tempfile.mkdtemp(prefix="gradprobe-vllm-"))
    model = policy.model
    model.save_pretrained(folder, safe_serialization=True)
    return folder


def build_engine(policy, *, seed: int = 0, model_path: str | None = None, gpu_memory_utilization: float = 0.3,
                 max_model_len: int | None = None, enable_prefix_caching: bool = True, enforce_eager: bool = False,
                 **engine_kwargs):
    """A ``vllm.LLM`` holding the policy's weights, colocated with training (TRL's colocate mode).

    Parameters
    ----------
    policy : gradprobe.models.Policy
    seed : int
        Engine seed.
    model_path : str, optional
        A folder vLLM can load; default: :func:`export_policy` into a temporary folder.
    gpu_memory_utilization : float
        Fraction of the GPU's memory vLLM may take (weights + KV cache); the rest is left to
        training.
    max_model_len : int, optional
        Context limit of the engine (default: the model's).
    enable_prefix_caching : bool
        Reuse KV blocks of shared prefixes (rollout groups, MC continuations).
    enforce_eager : bool
        No CUDA graphs (faster start, slower decoding).
    **engine_kwargs
        Passed to ``vllm.LLM``.

    Raises
    ------
    VLLMUnavailableError
        vLLM does not import (fix: ``pip install gradprobe[vllm]`` on a GPU machine).
    """
    # in-process engine core, so the worker's model is reachable for weight pushes (TRL colocate)
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    try:
        from vllm import LLM
    except Exception as e:  # ImportError, or a CUDA/torch mismatch raised at import
        raise VLLMUnavailableError(f"vLLM is not usable here ({type(e).__name__}: {e}); {VLLM_FIX}") from e
    dtype = {torch.bfloat16: "bfloat16", torch.float16: "float16", torch.float32: "float32"}.get(policy.dtype)
    if dtype is None:
        raise ValueError(f"vLLM cannot run a {policy.dtype} model; load the policy in bfloat16, float16 or float32")
    path = model_path or export_policy(policy)
    kwargs = dict(model=path, dtype=dtype, seed=int(seed), enable_prefix_caching=enable_prefix_caching,
                  logprobs_mode="processed_logprobs", skip_tokenizer_init=True,
                  gpu_memory_utilization=gpu_memory_utilization, enforce_eager=enforce_eager)
    if max_model_len is not None:
        kwargs["max_model_len"] = int(max_model_len)
    kwargs.update(engine_kwargs)
    return LLM(**kwargs)


def default_params_factory():
    """``vllm.SamplingParams`` (imports vLLM)."""
    from vllm import SamplingParams

    return SamplingParams


def in_process_worker(llm):
    """The engine's (driver) worker when the engine runs in this process (else None)."""
    executor = getattr(getattr(llm, "llm_engine", None), "model_executor", None)
    return getattr(executor, "driver_worker", None)


def in_process_model(llm):
    """The engine's ``nn.Module`` when the engine runs in this process (else None)."""
    worker = in_process_worker(llm)
    for holder in (worker, getattr(worker, "__dict__", {}).get("worker")):
        runner = getattr(holder, "model_runner", None)
        model = getattr(runner, "model", None)
        if model is not None and hasattr(model, "load_weights"):
            return model
    return None


class LoadWeights:
    """Picklable ``apply_model`` callback: ``model.load_weights(weights)`` inside each worker."""

    def __init__(self, weights: list[tuple[str, torch.Tensor]]):
        self.weights = weights

    def __call__(self, model):
        model.load_weights(iter(self.weights))
        return len(self.weights)


def token_logprob(entry, token: int) -> float:
    """The sampled token's log-probability from one position of vLLM's ``logprobs``."""
    if entry is None:
        return math.nan
    item = entry.get(token) if hasattr(entry, "get") else None
    if item is None and hasattr(entry, "items"):
        for key, val in entry.items():
            if int(key) == int(token):
                item = val
                break
    if item is None:
        return math.nan
    value = getattr(item, "logprob", item)
    return float(value)
