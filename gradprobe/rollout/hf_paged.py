"""Sampling with transformers' continuous batching over a paged KV cache (``hf_paged``).

The fast rollout backend that needs nothing beyond transformers (vLLM's wheel pins another torch
and is too large for some GPU machines): each call builds a
``transformers`` ``ContinuousBatchingManager`` (``model.init_continuous_batching``, the engine
behind ``model.generate_batch``, transformers >= 5), queues one request per prompt, runs the
manager's generation loop and returns the same :class:`~gradprobe.rollout.base.Sample` objects as
:class:`~gradprobe.rollout.hf.HFSampler`. What it changes against batched ``generate``:

* **no padding, no lock-step**: a request leaves the batch at its EOS or its own budget and a
  waiting one takes its place, so a batch of ragged completions does not pay for its longest
  (``generate`` decodes every row to the micro-batch's longest);
* **shared prompt prefix**: the K samples of a prompt are one request with
  ``num_return_sequences=K``; the manager prefills the prompt once and forks its KV blocks to the
  K children (each child then samples its own first token), so the G rollouts of a prompt and
  the K Monte-Carlo continuations of a step prefix pay one prefill;
* **per-request budgets**: ``max_new_tokens`` per prompt is each request's own limit
  (``add_request(max_new_tokens=...)``), and every request stops on any of the policy's EOS ids
  (``eos_token_id=policy.eos_token_ids``); ids are still cut with
  :func:`~gradprobe.rollout.base.cut_at_eos`, so the contract of :mod:`gradprobe.rollout.base`
  holds exactly as for ``hf``;
* **the same clean sampling settings** as ``hf`` (a fresh ``GenerationConfig`` holding only
  temperature, top_p, top_k), with ``drop_unsupported_processors=False`` so that a logits
  processor continuous batching does not support raises instead of being dropped silently.

Runs on the CPU (tested there) and on CUDA. The attention used while sampling is ``sdpa`` (the
manager accepts ``sdpa``, ``paged|eager`` and flash kernels, not the probe's ``gradprobe_eager``);
the policy's own implementation is restored after each call. The KV cache is sized from the
call's workload (``num_blocks`` = blocks for every sample's prompt + budget), not from free
memory (transformers' default takes 80-90% of free device memory, or of the host's RAM on a CPU),
so a sampler sharing a device with training takes only what a call needs.

Determinism: call ``c`` of a sampler seeded ``s`` seeds the manager with ``s + c``
(``ContinuousBatchingConfig.seed``; the manager's thread calls ``torch.manual_seed``, inside
``torch.random.fork_rng`` here, so the caller's RNG is untouched), and every request is queued
before the generation loop starts, so the scheduler sees the same queue each time: the same
prompts, budgets, settings and ``max_batch_tokens`` give the same samples on the CPU (tested).
They differ from ``hf``'s samples for the same seed (different batches draw the random numbers),
and on CUDA they can also vary with ``max_batch_tokens`` left to be inferred from free memory and
with non-deterministic kernels; pass ``max_batch_tokens`` to fix the schedule.

Per-call cost: building the manager and its ``stop()`` (which runs ``gc.collect()`` and empties
the device cache) add a fixed overhead per call (about 0.1 s on an idle machine, seconds on a
loaded one), so the backend is meant for large calls (rollout batches, all MC continuations of a
batch in one call), not many tiny ones. Whether it beats ``hf`` there depends on the machine and the model:
``benchmarks/gpu_check.sh`` measures it (the figures are in the README, "GPU path").

Sampler log-probabilities (``logprobs=True``): the manager's ``return_logprobs`` (log-softmax of
the processed logits, i.e. at the sampling temperature), returned as
:class:`~gradprobe.rollout.vllm_sampler.VLLMSample` so that
:func:`~gradprobe.rollout.vllm_sampler.sampler_logprobs` and ``UpdateConfig(importance_sampling="tis")``
work as with vLLM. ``hf`` gives none, so the default is off.
"""

from __future__ import annotations

import math
import time
from typing import Sequence

import torch

from ..config import SamplingConfig
from ..models import use_attention
from .base import Sample, cut_at_eos, non_finite_sampling, per_prompt_budgets
from .hf import HFSampler
from .logprob_samples import VLLMSample

__all__ = ["HFPagedSampler"]


class HFPagedSampler(HFSampler):
    """A :class:`~gradprobe.rollout.base.Sampler` backed by transformers' continuous batching.

    Parameters
    ----------
    policy : gradprobe.models.Policy
        Model, tokenizer and ``eos_token_ids``.
    seed : int
        Call ``c`` (0, 1, ...) seeds the manager with ``seed + c``.
    attn_implementation : str
        Attention while sampling: ``"sdpa"`` (default), ``"paged|eager"`` or a flash kernel
        (``"flash_attention_2"`` where installed); restored afterwards.
    progress : bool
        Show a tqdm bar per call (requests done).
    page_size : int, optional
        Tokens per KV page; default 256 on CUDA (transformers' default), 32 elsewhere.
    max_batch_tokens : int, optional
        Tokens per forward pass of the manager; default: inferred by transformers on CUDA, 256 on
        the CPU. Fixing it fixes the schedule (see the module docstring on determinism).
    logprobs : bool
        Return :class:`~gradprobe.rollout.vllm_sampler.VLLMSample` with the sampler's per-token
        log-probabilities (nats, at the sampling temperature).
    compile_level : int
        ``ContinuousBatchingConfig.default_compile_level`` (0 = eager; 1-3 ``torch.compile`` with
        longer warm-up).

    Attributes
    ----------
    calls, seconds, generated_tokens
        As :class:`~gradprobe.rollout.hf.HFSampler` (``seconds`` includes the manager's set-up).

    Raises
    ------
    ValueError
        ``page_size < 4`` or ``max_batch_tokens < 1``.
    """

    def __init__(self, policy, *, seed: int = 0, attn_implementation: str = "sdpa", progress: bool = True,
                 page_size: int | None = None, max_batch_tokens: int | None = None, logprobs: bool = False,
                 compile_level: int = 0):
        super().__init__(policy, seed=seed, attn_implementation=attn_implementation, progress=progress)
        if page_size is not None and page_size < 4:
            raise ValueError(f"page_size must be >= 4 tokens (transformers' paged cache), got {page_size}")
        if max_batch_tokens is not None and max_batch_tokens < 1:
            raise ValueError(f"max_batch_tokens must be >= 1, got {max_batch_tokens}")
        self.page_size = page_size
        self.max_batch_tokens = max_batch_tokens
        self.logprobs = bool(logprobs)
        self.compile_level = int(compile_level)

    def __repr__(self) -> str:
        return f"HFPagedSampler(policy={self.policy.name!r}, seed={self.seed}, calls={self.calls})"

    def with_seed(self, seed: int) -> "HFPagedSampler":
        """A new sampler of the same policy and settings seeded ``seed``; its call counter starts at 0."""
        return HFPagedSampler(self.policy, seed=seed, attn_implementation=self.attn_implementation,
                              progress=self.progress, page_size=self.page_size,
                              max_batch_tokens=self.max_batch_tokens, logprobs=self.logprobs,
                              compile_level=self.compile_level)

    def _cb_config(self, device: torch.device, seed: int, requests: list[tuple[list[int], int]], num_samples: int):
        from transformers import ContinuousBatchingConfig

        page = self.page_size or (256 if device.type == "cuda" else 32)
        # every sample's prompt + budget in whole pages, +1 page per request for the child's copied
        # partial page at the fork, +1 spare: an upper bound on the blocks the call can hold at once
        blocks = sum(num_samples * (math.ceil((len(p) + b) / page) + 1) for p, b in requests) + 1
        mbt = self.max_batch_tokens if self.max_batch_tokens is not None else (None if device.type == "cuda" else 256)
        try:
            return ContinuousBatchingConfig(page_size=page, num_blocks=blocks, max_batch_tokens=mbt, seed=seed,
                                            auto_switch_to_flash=False, return_logprobs=self.logprobs,
                                            drop_unsupported_processors=False,
                                            default_compile_level=self.compile_level, allow_block_sharing=True)
        except TypeError as e:  # an older transformers without one of these settings
            import transformers

            raise RuntimeError(f"the hf_paged sampler needs transformers' ContinuousBatchingConfig as in 5.24 "
                               f"(this is transformers {transformers.__version__}: {e}); upgrade transformers "
                               "or use the 'hf' backend") from e

    def sample(self, prompts: list[list[int]], *, num_samples: int, sampling: SamplingConfig,
               max_new_tokens: int | Sequence[int] | None = None, desc: str | None = None,
               greedy: bool = False) -> list[Sample]:
        """Draw ``num_samples`` completions of every prompt (one request per prompt, K children).

        Parameters
        ----------
        prompts : list[list[int]], length M
            Unpadded prompt ids, any lengths.
        num_samples : int
            K, completions per prompt (K >= 1): the request's ``num_return_sequences``.
        sampling : SamplingConfig
            ``temperature``, ``top_p``, ``top_k`` (0 = off), ``max_new_tokens``; ``batch_size``
            is not used (the manager schedules its own batches, up to ``max_batch_tokens``).
        max_new_tokens : int or sequence of int (length M), optional
            Overrides ``sampling.max_new_tokens`` for this call, or per prompt (each request's own
            limit). A budget of 0 gives an empty, truncated sample without a request.
        desc : str, optional
            Progress-bar label.
        greedy : bool
            Argmax decoding (evaluation); the sampling settings are then ignored.

        Returns
        -------
        list[Sample], length M * K, prompt-major (sample ``i * K + k`` continues prompt ``i``);
        :class:`~gradprobe.rollout.vllm_sampler.VLLMSample` when ``logprobs`` is set.

        Raises
        ------
        PromptTooLongError
            ``len(prompt) + max_new_tokens > max_position_embeddings`` for some prompt.
        ValueError
            ``num_samples < 1``, a negative budget, a budget list of the wrong length, or an
            empty prompt.
        RuntimeError
            The manager's generation loop failed or a request ended with an error (its message
            is quoted).
        NonFiniteSamplingError
            A request failed on NaN/inf next-token probabilities (the policy's weights diverged).
        """
        if num_samples < 1:
            raise ValueError(f"num_samples must be >= 1, got {num_samples}")
        budgets = per_prompt_budgets(max_new_tokens, len(prompts), sampling.max_new_tokens)
        call = self.calls
        self.calls += 1
        prompts = [[int(t) for t in p] for p in prompts]
        self.check_prompts(prompts, budgets)
        out: list[Sample | None] = [self._empty() if budgets[n // num_samples] == 0 else None
                                    for n in range(len(prompts) * num_samples)]
        todo = [i for i, b in enumerate(budgets) if b > 0]
        if not todo:
            return out  # type: ignore[return-value]

        results, forks, eos = self._generate(prompts, budgets, todo, sampling=sampling, greedy=greedy,
                                             num_samples=num_samples, call=call, desc=desc)
        self._fill(out, results, todo, budgets, num_samples, forks, eos)
        self.generated_tokens += sum(len(s.token_ids) for s in out)  # type: ignore[union-attr]
        return out  # type: ignore[return-value]

    def _generate(self, prompts: list[list[int]], budgets: list[int], todo: list[int], *, sampling: SamplingConfig,
                  greedy: bool, num_samples: int, call: int, desc: str | None) -> tuple[dict, int, list[int]]:
        """Run the requests of prompts ``todo`` (those with a budget > 0) through the continuous-batching
        manager, seeded with ``self.seed + call``; returns (results by request, children per request,
        EOS ids). Wall seconds are added to ``self.seconds``."""
        from tqdm.auto import tqdm
        from transformers import GenerationConfig
        from transformers.generation.continuous_batching.utils import WorkloadHints

        model = self.policy.model
        eos = [int(e) for e in self.policy.eos_token_ids]
        device = next(model.parameters()).device
        devices = [device] if device.type == "cuda" else []
        requests = [(prompts[i], budgets[i]) for i in todo]
        # greedy: one request per prompt, its argmax completion copied K times (transformers refuses
        # num_return_sequences > 1 without sampling; the K argmax completions would be identical)
        forks = 1 if greedy else num_samples
        config = self._generation_config(sampling, max(budgets), greedy, num_return_sequences=forks)
        hints = WorkloadHints(max_prompt_length=max(len(p) for p, _ in requests),
                              max_generated_length=max(b for _, b in requests),
                              num_requests=len(requests) * forks)
        start = time.perf_counter()
        bar = tqdm(total=len(requests) * forks, desc=desc or "sampling (paged)", unit="seq",
                   disable=not self.progress, leave=False)
        saved_config = model.generation_config
        try:
            model.generation_config = GenerationConfig()  # no checkpoint defaults (as HFSampler)
            with torch.random.fork_rng(devices=devices), use_attention(model, self.attn_implementation), \
                    torch.inference_mode():
                with non_finite_sampling("hf_paged", model):  # a request failed on NaN/inf probabilities: diverged
                    results = self._run_requests(config, self._cb_config(device, self.seed + call, requests, forks),
                                                 hints, todo, requests, forks, eos, bar)
        finally:
            model.generation_config = saved_config
            bar.close()
        self.seconds += time.perf_counter() - start
        return results, forks, eos

    def _run_requests(self, config, cb_config, hints, todo: list[int], requests: list, forks: int, eos: list[int],
                      bar) -> dict:
        """Queue every request (prompt ids, budget) of ``todo``'s prompts on a fresh continuous-batching
        manager, run it until all ``len(requests) * forks`` completions are finished, and return them
        by request id (``"p{i}"`` and its forks ``"p{i}__child#{k}"``).

        Raises
        ------
        RuntimeError
            The manager refused a request, its loop stopped early, or a request ended with an error.
        """
        model = self.policy.model
        results = {}
        manager = model.init_continuous_batching(
            generation_config=config,
            continuous_batching_config=cb_config,
            workload_hints=hints)
        try:
            # all requests are queued before the loop starts: the same queue, the same schedule
            ids = [manager.add_request(p, request_id=f"p{i}", max_new_tokens=b, eos_token_id=eos)
                   for i, (p, b) in zip(todo, requests)]
            if any(r is None for r in ids):
                raise RuntimeError("the continuous-batching manager refused a request (see transformers' log)")
            manager.start()
            while len(results) < len(requests) * forks:
                result = manager.get_result(timeout=1.0)
                if result is None:
                    if not manager.is_running():
                        raise RuntimeError(
                            f"the continuous-batching generation loop stopped with {len(results)} of "
                            f"{len(requests) * forks} completions done (see transformers' log)")
                    continue
                if result.is_finished():
                    if result.error is not None:
                        raise RuntimeError(f"request {result.request_id} failed: {result.error}")
                    results[result.request_id] = result
                    bar.update(1)
        finally:
            manager.stop(block=True)
            manager.destroy()
        return results

    def _fill(self, out: list, results: dict, todo: list[int], budgets: list[int], num_samples: int, forks: int,
              eos: list[int]) -> None:
        """Put the K samples of each prompt of ``todo`` into ``out`` (prompt-major), cut at EOS and budget."""
        for i in todo:
            # request "p{i}" is sample 0; its forks "p{i}__child#{k}" are samples 1..K-1
            names = [f"p{i}"] + [f"p{i}__child#{k}" for k in range(forks - 1)]
            names += [names[0]] * (num_samples - forks)  # greedy copies
            for k, name in enumerate(names):
                res = results[name]
                cut = cut_at_eos(res.generated_tokens, eos, budgets[i])
                out[i * num_samples + k] = self._sample(cut, res)

    def _empty(self) -> Sample:
        if not self.logprobs:
            return Sample(token_ids=[], truncated=True)
        return VLLMSample(token_ids=[], truncated=True, logprobs=[], finish_reason="length")

    def _sample(self, cut: Sample, res) -> Sample:
        if not self.logprobs:
            return cut
        lp = [float(x) for x in (res.logprobs or [])][:len(cut.token_ids)]
        lp += [math.nan] * (len(cut.token_ids) - len(lp))
        return VLLMSample(token_ids=cut.token_ids, truncated=cut.truncated, logprobs=lp,
                          finish_reason="length" if cut.truncated else "stop")
