"""Sampling from the policy: the :class:`Sampler` role, its backends, rollout batches.

``base``          :class:`Sample`, the :class:`Sampler` protocol, :class:`PromptTooLongError`,
                  :class:`NonFiniteSamplingError` (a diverged policy);
``hf``            :class:`HFSampler` (batched ``model.generate``);
``hf_paged``      :class:`HFPagedSampler` (transformers' continuous batching, paged KV cache);
``vllm_sampler``  ``VLLMSampler`` (optional ``vllm`` extra, imported only when chosen), its engine
                  in ``vllm_engine``;
``logprob_samples`` samples with the sampler's per-token log-probabilities and their (N, T) tensor;
``collect``       :func:`collect_rollouts` (encode, sample, score, charge the ledger) and the pure
                  :func:`build_batch`;
``guided``        off-context guidance rollouts (hinted sampling, trained unhinted), its settings
                  and hints in ``guidance``.

The backends are chosen by name from :data:`SAMPLERS` with :func:`make_sampler` (the one place
that maps a backend name to a class).
"""

from .base import NonFiniteSamplingError, PromptTooLongError, Sample, Sampler, cut_at_eos, per_prompt_budgets
from .collect import build_batch, collect_rollouts, score_completions
from .hf import HFSampler
from .hf_paged import HFPagedSampler

#: Backend name -> "module:class" of a :class:`Sampler`; every class takes ``(policy, *, seed, **options)``.
#: ``hf``: plain ``generate`` (exact reference, any device); ``hf_paged``: continuous batching with
#: a paged KV cache (transformers only, CPU and CUDA); ``vllm``: the optional vLLM engine (CUDA).
SAMPLERS = {
    "hf": "gradprobe.rollout.hf:HFSampler",
    "hf_paged": "gradprobe.rollout.hf_paged:HFPagedSampler",
    "vllm": "gradprobe.rollout.vllm_sampler:VLLMSampler",
}


def check_backend(backend: str) -> None:
    """Fail before any model is loaded when ``backend`` cannot run here: ``vllm`` without vLLM installed.

    Only whether the package is installed is checked (:func:`gradprobe.config.backend_unavailable`, no
    import: vLLM's import takes seconds); a vLLM that is installed but fails to import is reported by
    :func:`make_sampler`.

    Raises
    ------
    ValueError
        ``backend`` is not a key of :data:`SAMPLERS` (the message lists them).
    gradprobe.rollout.vllm_sampler.VLLMUnavailableError
        ``vllm`` asked for where it is not installed (the message names ``--backend hf``).
    """
    if backend not in SAMPLERS:
        raise ValueError(f"unknown sampler backend {backend!r}; choose one of {sorted(SAMPLERS)}")
    from .. import config

    why = config.backend_unavailable(backend)
    if why is not None:
        from .vllm_engine import VLLMUnavailableError

        raise VLLMUnavailableError(why)


def make_sampler(backend: str, policy, *, seed: int = 0, **options) -> Sampler:
    """The rollout backend ``backend`` for ``policy``.

    Parameters
    ----------
    backend : {"hf", "hf_paged", "vllm"}
        A key of :data:`SAMPLERS`.
    policy : gradprobe.models.Policy
    seed : int
        The sampler's seed (call ``c`` draws with its own stream derived from it).
    **options
        Keyword arguments of the backend's class (e.g. ``progress=False``,
        ``max_batch_tokens=...`` for ``hf_paged``, ``gpu_memory_utilization=...`` for ``vllm``).

    Returns
    -------
    Sampler

    Raises
    ------
    ValueError
        ``backend`` is not a key of :data:`SAMPLERS` (the message lists them).
    gradprobe.rollout.vllm_sampler.VLLMUnavailableError
        ``vllm`` was asked for where it is not installed.
    """
    import importlib

    if backend not in SAMPLERS:
        raise ValueError(f"unknown sampler backend {backend!r}; choose one of {sorted(SAMPLERS)}")
    module, name = SAMPLERS[backend].split(":")
    return getattr(importlib.import_module(module), name)(policy, seed=seed, **options)


__all__ = ["NonFiniteSamplingError", "PromptTooLongError", "Sample", "Sampler", "cut_at_eos", "per_prompt_budgets",
           "build_batch", "collect_rollouts", "score_completions", "HFSampler", "HFPagedSampler", "SAMPLERS",
           "make_sampler", "check_backend"]
