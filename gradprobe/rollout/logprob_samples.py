"""Samples that carry the sampler's per-token log-probabilities (:class:`VLLMSample`, returned by
the vLLM and paged-HF backends) and their (N, T) batch tensor (:func:`sampler_logprobs`), the
"sampler" log-probabilities of truncated importance sampling
(:func:`gradprobe.grpo.losses.truncated_is_weights`). No vLLM import."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import torch

from .base import Sample

__all__ = ["VLLMSample", "sampler_logprobs"]


@dataclass
class VLLMSample(Sample):
    """A :class:`~gradprobe.rollout.base.Sample` with the sampler's per-token log-probabilities.

    Attributes
    ----------
    logprobs : list[float], length ``len(token_ids)``
        log pi_sampler(token_t | prefix) in nats at the sampling temperature (vLLM
        ``processed_logprobs``); NaN where vLLM reported none.
    finish_reason : str or None
        vLLM's (``"stop"``, ``"length"``), for diagnostics.
    """

    logprobs: list[float] = field(default_factory=list)
    finish_reason: str | None = None


def sampler_logprobs(samples: Sequence[Sample], num_columns: int, *, device=None,
                     dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The sampler's per-token log-probabilities as a batch tensor aligned with the completion columns.

    Parameters
    ----------
    samples : sequence of Sample, length N
        As returned by :meth:`~gradprobe.rollout.vllm_sampler.VLLMSampler.sample` (prompt-major, as
        :func:`gradprobe.rollout.collect.build_batch` lays out rows). Samples without
        ``logprobs`` (e.g. from :class:`~gradprobe.rollout.hf.HFSampler`) give NaN rows.
    num_columns : int
        T, the batch's completion columns (``batch.completion_mask.shape[1]``).

    Returns
    -------
    Tensor, shape (N, T)
        Column t of row n is the log-probability of the t-th generated token; NaN on padding.

    Raises
    ------
    ValueError
        A sample longer than ``num_columns`` or whose ``logprobs`` length differs from its ids.
    """
    out = torch.full((len(samples), int(num_columns)), math.nan, dtype=dtype)
    for n, s in enumerate(samples):
        lp = getattr(s, "logprobs", None)
        if not lp:
            continue
        if len(lp) != len(s.token_ids):
            raise ValueError(f"sample {n}: {len(lp)} log-probabilities for {len(s.token_ids)} tokens")
        if len(lp) > num_columns:
            raise ValueError(f"sample {n} has {len(lp)} tokens but the batch has {num_columns} completion columns")
        out[n, :len(lp)] = torch.tensor(lp, dtype=dtype)
    return out if device is None else out.to(device)
