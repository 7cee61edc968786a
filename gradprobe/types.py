"""The rollout batch: every tensor field with its shape.

Notation (DESIGN.md): B prompts, G completions per prompt (a *group*), N = B * G rows in
prompt-major order (row ``n = i * G + j``), P prompt columns (left-padded), T completion
columns (right-padded). ``input_ids[:, :P]`` is the prompt, ``input_ids[:, P:]`` the completion.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import torch

from .tasks.base import Problem


@dataclass
class RolloutBatch:
    """Rollouts of B prompts x G completions.

    Attributes
    ----------
    problems : list[Problem], length B
    group_size : int
        G.
    input_ids : LongTensor, shape (N, P + T)
        Left-padded prompt followed by the right-padded completion.
    attention_mask : LongTensor, shape (N, P + T)
        1 on prompt and completion tokens (including the first EOS), 0 on padding.
    prompt_length : int
        P.
    completion_mask : BoolTensor, shape (N, T)
        m_ijt: True on generated, non-pad tokens; the first EOS is kept, tokens after it are not.
    completions : list[str], length N
        Decoded completions without special tokens.
    truncated : BoolTensor, shape (N,)
        True when the completion hit ``max_new_tokens`` without an EOS.
    scores : Tensor (float64), shape (N,)
        Verifier outcome r_ij in {0, 1}; NaN where the verifier gave none.
    temperature : float
        Sampling temperature; log-probabilities are evaluated at it.
    prompt_token_ids : list[list[int]], length B
        Unpadded prompt ids (as sent to the sampler).
    metadata : dict
        Free-form (sampler name, seconds spent generating...).
    """

    problems: list[Problem]
    group_size: int
    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    prompt_length: int
    completion_mask: torch.Tensor
    completions: list[str]
    truncated: torch.Tensor
    scores: torch.Tensor
    temperature: float
    prompt_token_ids: list[list[int]]
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        n = len(self.problems) * self.group_size
        if self.input_ids.shape[0] != n or self.completion_mask.shape[0] != n or len(self.completions) != n:
            raise ValueError(
                f"RolloutBatch: expected N = B * G = {len(self.problems)} * {self.group_size} = {n} rows, got "
                f"input_ids {tuple(self.input_ids.shape)}, completion_mask {tuple(self.completion_mask.shape)}, "
                f"{len(self.completions)} completions"
            )
        if self.input_ids.shape[1] != self.prompt_length + self.completion_mask.shape[1]:
            raise ValueError("RolloutBatch: input_ids must have P + T columns")

    @property
    def num_prompts(self) -> int:
        """B."""
        return len(self.problems)

    @property
    def num_rows(self) -> int:
        """N = B * G."""
        return self.input_ids.shape[0]

    @property
    def completion_ids(self) -> torch.Tensor:
        """LongTensor, shape (N, T)."""
        return self.input_ids[:, self.prompt_length:]

    @property
    def completion_lengths(self) -> torch.Tensor:
        """LongTensor, shape (N,): tokens per completion (EOS included, padding excluded)."""
        return self.completion_mask.sum(-1)

    @property
    def group_ids(self) -> torch.Tensor:
        """LongTensor, shape (N,): the prompt index i of every row."""
        return torch.arange(self.num_prompts).repeat_interleave(self.group_size)

    @property
    def generated_tokens(self) -> int:
        """Completion tokens, padding excluded."""
        return int(self.completion_mask.sum())

    def scores_grouped(self) -> torch.Tensor:
        """Tensor (float64), shape (B, G)."""
        return self.scores.view(self.num_prompts, self.group_size)

    def select_groups(self, index) -> "RolloutBatch":
        """Sub-batch of the groups in ``index`` (a sequence of prompt indices, repeats allowed)."""
        index = torch.as_tensor(index, dtype=torch.long)
        rows = (index[:, None] * self.group_size + torch.arange(self.group_size)).reshape(-1)
        return replace(
            self,
            problems=[self.problems[i] for i in index.tolist()],
            input_ids=self.input_ids[rows],
            attention_mask=self.attention_mask[rows],
            completion_mask=self.completion_mask[rows],
            completions=[self.completions[r] for r in rows.tolist()],
            truncated=self.truncated[rows],
            scores=self.scores[rows],
            prompt_token_ids=[self.prompt_token_ids[i] for i in index.tolist()],
        )

    def to(self, device) -> "RolloutBatch":
        return replace(self, input_ids=self.input_ids.to(device), attention_mask=self.attention_mask.to(device),
                       completion_mask=self.completion_mask.to(device))
