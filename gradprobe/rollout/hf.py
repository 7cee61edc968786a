"""Sampling with Hugging Face ``generate``: batched, left-padded, deterministic for a seed.

Why the details matter (DESIGN.md, "Pitfalls"):

* the policy's ``generation_config`` may carry defaults (``top_k=20``, ``repetition_penalty``,
  ``min_p``...) that would make the sampler differ from the policy whose log-probabilities
  are differentiated; generation runs with a clean config holding only the
  :class:`~gradprobe.config.SamplingConfig` settings (``top_k=0`` means off);
* left padding with ``pad_token_id``; transformers derives position ids from the attention
  mask, so a row's sampling distribution does not depend on the other rows' lengths;
* completions are cut after the first id in ``policy.eos_token_ids`` (models with several EOS
  ids stop on any), so pad == EOS (SmolLM2) keeps the first EOS;
* ``torch.manual_seed(seed + call)`` inside ``torch.random.fork_rng``: the n-th call of a
  sampler built with a given seed draws the same samples, without touching the global RNG.
  Results depend on ``sampling.batch_size`` (micro-batch composition).
"""

from __future__ import annotations

import time
from typing import Sequence

import torch

from ..config import SamplingConfig
from ..models import use_attention
from .base import (MODEL_CONTEXT, Sample, check_prompt_ids, context_limit, cut_at_eos, non_finite_sampling,
                   per_prompt_budgets)


def _context_length(model) -> int | None:
    """The context limit of ``model`` (:func:`~gradprobe.rollout.base.context_limit` of its config)."""
    return context_limit(model.config)


class HFSampler:
    """A :class:`~gradprobe.rollout.base.Sampler` backed by ``model.generate``.

    Parameters
    ----------
    policy : gradprobe.models.Policy
        Model, tokenizer (``pad_token_id`` set) and ``eos_token_ids``.
    seed : int
        Call ``c`` (0, 1, ...) seeds torch with ``seed + c``.
    attn_implementation : str
        Attention used while generating (``sdpa`` is faster than the exact eager kernel the
        probe needs); the policy's implementation is restored afterwards.
    progress : bool
        Show a tqdm bar per call (sequences done).

    Attributes
    ----------
    calls : int
        Number of :meth:`sample` calls so far.
    seconds : float
        Wall seconds spent in ``generate`` (all calls).
    generated_tokens : int
        Completion tokens returned (EOS included, padding and ids after the first EOS excluded).
    """

    def __init__(self, policy, *, seed: int = 0, attn_implementation: str = "sdpa", progress: bool = True):
        self.policy = policy
        self.seed = int(seed)
        self.attn_implementation = attn_implementation
        self.progress = progress
        self.calls = 0
        self.seconds = 0.0
        self.generated_tokens = 0

    def __repr__(self) -> str:
        return f"HFSampler(policy={self.policy.name!r}, seed={self.seed}, calls={self.calls})"

    def with_seed(self, seed: int) -> "HFSampler":
        """A new sampler of the same policy and settings seeded ``seed`` (its own random stream,
        :mod:`gradprobe.streams`); its call counter starts at 0."""
        return HFSampler(self.policy, seed=seed, attn_implementation=self.attn_implementation, progress=self.progress)

    def context_limit(self) -> tuple[int | None, str]:
        """The context limit this sampler's :meth:`check_prompts` compares with, and its name for messages:
        the model's ``max_position_embeddings`` (None: no check)."""
        return _context_length(self.policy.model), MODEL_CONTEXT

    def check_prompts(self, prompts: list[list[int]], max_new_tokens) -> None:
        """Raise if a prompt is empty or ``len(prompt) + max_new_tokens`` exceeds the context
        (:func:`~gradprobe.rollout.base.check_prompt_ids` with :meth:`context_limit`).

        Parameters
        ----------
        prompts : list[list[int]], length M
        max_new_tokens : int or sequence of int (length M)

        Raises
        ------
        PromptTooLongError
            Names the prompt index, its length, ``max_position_embeddings`` and the fix.
        ValueError
            An empty prompt.
        """
        check_prompt_ids(prompts, per_prompt_budgets(max_new_tokens, len(prompts), 0), *self.context_limit())

    def _generation_config(self, sampling: SamplingConfig, max_new_tokens: int, greedy: bool,
                           num_return_sequences: int = 1):
        """The ``GenerationConfig`` of one call: every setting explicit (no checkpoint defaults)."""
        from transformers import GenerationConfig

        tok = self.policy.tokenizer
        common = dict(max_new_tokens=max_new_tokens, min_new_tokens=0, pad_token_id=tok.pad_token_id,
                      eos_token_id=[int(e) for e in self.policy.eos_token_ids], num_beams=1,
                      num_return_sequences=num_return_sequences,
                      repetition_penalty=1.0, no_repeat_ngram_size=0, use_cache=True)
        if greedy:
            return GenerationConfig(do_sample=False, **common)
        return GenerationConfig(do_sample=True, temperature=float(sampling.temperature), top_p=float(sampling.top_p),
                                top_k=int(sampling.top_k), **common)

    def sample(self, prompts: list[list[int]], *, num_samples: int, sampling: SamplingConfig,
               max_new_tokens: int | Sequence[int] | None = None, desc: str | None = None,
               greedy: bool = False) -> list[Sample]:
        """Draw ``num_samples`` completions of every prompt.

        Parameters
        ----------
        prompts : list[list[int]], length M
            Unpadded prompt ids, any lengths.
        num_samples : int
            K, completions per prompt (K >= 1).
        sampling : SamplingConfig
            ``temperature``, ``top_p``, ``top_k`` (0 = off), ``max_new_tokens``, ``batch_size``
            (sequences per ``generate`` call).
        max_new_tokens : int or sequence of int (length M), optional
            Overrides ``sampling.max_new_tokens`` for this call, or per prompt. A micro-batch
            generates up to its largest budget and every row is cut at its own. A budget of 0
            gives an empty, truncated sample without running the model.
        desc : str, optional
            Progress-bar label.
        greedy : bool
            Argmax decoding (evaluation); the sampling settings are then ignored.

        Returns
        -------
        list[Sample], length M * K, prompt-major (sample ``i * K + k`` continues prompt ``i``).

        Raises
        ------
        PromptTooLongError
            ``len(prompt) + max_new_tokens > max_position_embeddings`` for some prompt.
        ValueError
            ``num_samples < 1``, a negative budget, a budget list of the wrong length, or an
            empty prompt.
        NonFiniteSamplingError
            The policy's next-token probabilities are NaN/inf (its weights diverged; sampled calls only).
        """
        from tqdm.auto import tqdm
        from transformers import GenerationConfig

        if num_samples < 1:
            raise ValueError(f"num_samples must be >= 1, got {num_samples}")
        budgets = per_prompt_budgets(max_new_tokens, len(prompts), sampling.max_new_tokens)
        call = self.calls
        self.calls += 1
        self.check_prompts(list(prompts), budgets)
        rows = [(list(p), b) for p, b in zip(prompts, budgets) for _ in range(num_samples)]  # prompt-major
        out: list[Sample | None] = [Sample(token_ids=[], truncated=True) if b == 0 else None for _, b in rows]
        todo = [n for n, (_, b) in enumerate(rows) if b > 0]
        if not todo:
            return out  # type: ignore[return-value]

        model = self.policy.model
        device = next(model.parameters()).device
        step = max(1, int(sampling.batch_size))
        start = time.perf_counter()
        devices = [device] if device.type == "cuda" else []
        saved_config = model.generation_config
        bar = tqdm(total=len(todo), desc=desc or "sampling", unit="seq", disable=not self.progress, leave=False)
        try:
            model.generation_config = GenerationConfig()  # no checkpoint defaults (see module docstring)
            with torch.random.fork_rng(devices=devices), use_attention(model, self.attn_implementation), \
                    torch.inference_mode():
                torch.manual_seed(self.seed + call)
                for lo in range(0, len(todo), step):
                    chunk = todo[lo: lo + step]
                    generated = self._generate_chunk([rows[n] for n in chunk], sampling, greedy, device)
                    for n, row in zip(chunk, generated):
                        out[n] = cut_at_eos(row, self.policy.eos_token_ids, rows[n][1])
                    bar.update(len(chunk))
        finally:
            model.generation_config = saved_config
            bar.close()
        self.seconds += time.perf_counter() - start
        self.generated_tokens += sum(len(s.token_ids) for s in out)
        return out  # type: ignore[return-value]

    def _generate_chunk(self, chunk_rows: list, sampling: SamplingConfig, greedy: bool, device) -> list[list[int]]:
        """One ``generate`` call over (prompt ids, budget) rows, left-padded to the longest prompt and
        run to the largest budget; each row's generated ids (not yet cut at EOS or its budget).

        Raises
        ------
        NonFiniteSamplingError
            ``torch.multinomial`` met NaN/inf probabilities (a diverged policy).
        """
        model, pad = self.policy.model, self.policy.tokenizer.pad_token_id
        width = max(len(r) for r, _ in chunk_rows)
        input_ids = torch.full((len(chunk_rows), width), pad, dtype=torch.long)
        attention_mask = torch.zeros((len(chunk_rows), width), dtype=torch.long)
        for k, (r, _) in enumerate(chunk_rows):
            input_ids[k, width - len(r):] = torch.tensor(r, dtype=torch.long)
            attention_mask[k, width - len(r):] = 1
        config = self._generation_config(sampling, max(b for _, b in chunk_rows), greedy)
        with non_finite_sampling("hf", model):  # torch.multinomial on NaN/inf probabilities: a diverged policy
            generated = model.generate(input_ids=input_ids.to(device), attention_mask=attention_mask.to(device),
                                       generation_config=config)
        return generated[:, width:].tolist()
