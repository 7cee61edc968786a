"""A process reward model (PRM): a Hugging Face classification model scores every step.

The model-based counterpart of :mod:`gradprobe.rewards.process`: instead of a rule, a
classifier gives each step a value V_s in [0, 1], the probability of its positive label
(Lightman et al. 2023, "Let's Verify Step by Step"; Wang et al. 2024, Math-Shepherd), and the
values go through the ``mc_value`` path (:func:`gradprobe.rewards.dense.mc_value_advantages`).

* a **token-classification** model (``*ForTokenClassification``) reads the question and the
  whole completion once; V_s is read at the last token of step s;
* a **sequence-classification** model (``*ForSequenceClassification``) reads the question and
  the prefix of steps 1..s, once per step; V_s is its probability.

The input is ``question + "\\n"`` followed by the completion's steps as generated, each encoded
with the PRM's own tokenizer. Steps are those of :mod:`gradprobe.rewards.process`
(:func:`~gradprobe.rewards.steps.split_steps`, never merged); a step holding only the answer
line (``####``) or blank text is not scored and a completion without steps gets zero
advantages. A single-logit head gives V_s = sigmoid(logit); otherwise V_s = softmax(logits)
[positive_label], label 1 by default.

Cost: no generated tokens; every forward pass is charged to ``ledger.flops["reward"]`` as
2 x parameters x tokens (read, padding excluded; Kaplan et al. 2020, forward = 2N per token)
and its wall time to ``ledger.device_seconds["reward"]``. A path that is not a classification
model is refused when the reward is built (:class:`NotAClassificationModelError`), before any
rollout is generated.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import torch

from ..types import RolloutBatch
from .base import RewardContext, RewardOutput
from .dense import hybrid_advantages, hybrid_overflow_stats, mc_value_advantages
from .outcome import outcome_reward
from .process import make_process_reward
from .steps import StepValues, _same_batch, split_steps

KINDS = ("token", "sequence")


class NotAClassificationModelError(ValueError):
    """The PRM path does not hold a token- or sequence-classification model (names what it holds)."""


def _kind_of(path, config, kind: str) -> str:
    archs = list(getattr(config, "architectures", None) or [])
    found = {"token": any(a.endswith("ForTokenClassification") for a in archs),
             "sequence": any(a.endswith("ForSequenceClassification") for a in archs)}
    if kind not in ("auto",) + KINDS:
        raise ValueError(f"PRM kind must be 'auto', 'token' or 'sequence', got {kind!r}")
    if kind == "auto":
        kind = "token" if found["token"] else "sequence" if found["sequence"] else ""
    if not kind or not found[kind]:
        want = "a token- or sequence-classification" if not kind else f"a {kind}-classification"
        raise NotAClassificationModelError(
            f"PRM {str(path)!r} is not {want} model: its config lists architectures {archs or 'none'}; "
            "a process reward model must be saved as *ForTokenClassification (one score per token) or "
            "*ForSequenceClassification (one score per step prefix), e.g. with "
            "AutoModelForTokenClassification.from_pretrained(...).save_pretrained(path)")
    return kind


def _positive_index(config, positive_label) -> int | None:
    n = int(config.num_labels)
    if positive_label is None:
        return None if n == 1 else 1
    if isinstance(positive_label, str):
        ids = {str(k): int(v) for k, v in (getattr(config, "label2id", None) or {}).items()}
        if positive_label not in ids:
            raise ValueError(f"PRM positive_label {positive_label!r} is not a label of the model; "
                             f"labels: {sorted(ids)}")
        return ids[positive_label]
    if n == 1 or not 0 <= int(positive_label) < n:
        raise ValueError(f"PRM positive_label must index one of the model's {n} labels (num_labels >= 2), "
                         f"got {positive_label!r}")
    return int(positive_label)


@dataclass
class _PRMScorer:
    """A loaded PRM and how to read step values from it (the work of one :func:`prm_reward`).

    Attributes
    ----------
    model : transformers classification model
        In eval mode on ``device``.
    tokenizer : transformers tokenizer
        The PRM's own.
    kind : {"token", "sequence"}
    positive : int or None
        Label index of V_s; None: sigmoid of the single logit.
    pad : int
        Pad id of right-padded forward batches.
    device : str
    batch_size : int
        Sequences per forward pass.
    params : int
        Parameter count (FLOPs: 2 x params per token read).
    """

    model: Any
    tokenizer: Any
    kind: str
    positive: int | None
    pad: int
    device: str
    batch_size: int
    params: int

    @classmethod
    def load(cls, path, *, kind: str, positive_label, tokenizer, device: str, dtype: torch.dtype,
             batch_size: int) -> "_PRMScorer":
        """Load the model and its tokenizer (errors as in :func:`prm_reward`)."""
        # transformers is imported here, not at module level: it is heavy (seconds) and only a PRM
        # reward needs it (models.py defers it the same way)
        from transformers import (AutoConfig, AutoModelForSequenceClassification, AutoModelForTokenClassification,
                                  AutoTokenizer)

        config = AutoConfig.from_pretrained(path)
        kind = _kind_of(path, config, kind)
        positive = _positive_index(config, positive_label)
        auto = AutoModelForTokenClassification if kind == "token" else AutoModelForSequenceClassification
        model = auto.from_pretrained(path, dtype=dtype).to(device).eval()
        tok = tokenizer if tokenizer is not None else AutoTokenizer.from_pretrained(path)
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        if pad is None:
            raise ValueError(f"PRM tokenizer of {str(path)!r} has neither a pad nor an EOS token; pass tokenizer=")
        if getattr(model.config, "pad_token_id", None) is None:
            model.config.pad_token_id = pad  # sequence heads find each row's last token with it
        return cls(model, tok, kind, positive, pad, device, batch_size, sum(p.numel() for p in model.parameters()))

    @property
    def cache_key(self) -> tuple:
        return ("prm", id(self.model))

    def probabilities(self, logits: torch.Tensor) -> torch.Tensor:
        """(..., labels) logits -> (...) float64 probabilities of the positive label."""
        logits = logits.double()
        if self.positive is None:
            return torch.sigmoid(logits[..., 0])
        return torch.softmax(logits, -1)[..., self.positive]

    @torch.no_grad()
    def forward(self, seqs: list[list[int]]) -> list[torch.Tensor]:
        """Per sequence: (L,) probabilities (token head) or a 0-d one (sequence head)."""
        out = []
        for i in range(0, len(seqs), self.batch_size):
            chunk = seqs[i: i + self.batch_size]
            width = max(len(s) for s in chunk)
            ids = torch.full((len(chunk), width), self.pad, dtype=torch.long)
            mask = torch.zeros((len(chunk), width), dtype=torch.long)
            for r, s in enumerate(chunk):
                ids[r, : len(s)] = torch.tensor(s, dtype=torch.long)
                mask[r, : len(s)] = 1
            logits = self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device)).logits
            probs = self.probabilities(logits).cpu()
            out += [probs[r, : len(s)] if self.kind == "token" else probs[r] for r, s in enumerate(chunk)]
        return out

    def encode(self, ids: list[int], question: str, tokenizer) -> tuple[list[int], list[int], list[tuple]]:
        """One completion's PRM inputs.

        Parameters
        ----------
        ids : list[int]
            The completion's ids (policy tokenizer, no padding).
        question : str
        tokenizer : transformers tokenizer
            The policy's (splits and decodes the completion).

        Returns
        -------
        kept : list[int]
            Boundaries (policy tokens) of the scored steps.
        ends : list[int]
            Per scored step, the position of its last PRM token in the PRM input.
        seqs : list[(list[int], int or None)]
            The PRM inputs and the scored step each one is for (None: all of them, token head).
        """
        prm_ids = self.tokenizer(question + "\n")["input_ids"]
        kept, ends, seqs, s = [], [], [], 0
        for e in split_steps(ids, tokenizer, max_steps=max(len(ids), 1)):
            text = tokenizer.decode(ids[s: e + 1], skip_special_tokens=True)
            s = e + 1
            lines = [x.strip() for x in text.splitlines() if x.strip()]
            step_ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            prm_ids = prm_ids + step_ids
            if not lines or all(x.startswith("####") for x in lines) or not step_ids:
                continue
            kept.append(e)
            ends.append(len(prm_ids) - 1)
            if self.kind == "sequence":
                seqs.append((list(prm_ids), len(kept) - 1))
        if self.kind == "token" and kept:
            seqs.append((prm_ids, None))
        return kept, ends, seqs

    def step_values(self, batch: RolloutBatch, ctx: RewardContext) -> tuple[StepValues, dict]:
        """V_s of every scored step of ``batch`` and the PRM's cost (cached in ``ctx.cache``; charged once)."""
        hit = ctx.cache.get(self.cache_key)
        if hit is not None and _same_batch(hit[0], batch):
            return hit[1]
        start = time.perf_counter()
        g, lengths, comp = batch.group_size, batch.completion_lengths.tolist(), batch.completion_ids
        bounds, ends, seqs, owners = [], [], [], []  # owners: (row, step) of each sequence/position
        for n in range(batch.num_rows):
            kept, pos, row = self.encode(comp[n, : lengths[n]].tolist(), batch.problems[n // g].question,
                                         ctx.tokenizer)
            seqs += [x for x, _ in row]
            owners += [(n, step) for _, step in row]
            bounds.append(kept)
            ends.append(pos)
        values = [[math.nan] * len(b) for b in bounds]
        for (n, step), probs in zip(owners, self.forward(seqs)):
            if step is None:
                values[n] = [float(probs[p]) for p in ends[n]]
            else:
                values[n][step] = float(probs)
        tokens = sum(len(x) for x in seqs)
        seconds = time.perf_counter() - start
        ctx.ledger.add_flops("reward", 2.0 * self.params * tokens)
        ctx.ledger.add_seconds("reward", seconds)
        rewards = [sum(v) / len(v) if v else 0.0 for v in values]
        v0 = []
        for i in range(0, len(rewards), g):
            v0 += [sum(rewards[i: i + g]) / len(rewards[i: i + g])] * len(rewards[i: i + g])
        sv = StepValues(boundaries=bounds, values=values, v0=v0, rewards=rewards, group_size=g, seconds=seconds)
        extra = {"prm_tokens": tokens, "prm_flops": 2.0 * self.params * tokens, "prm_seconds": seconds,
                 "prm_forward_sequences": len(seqs), "no_step_completions": sum(1 for b in bounds if not b)}
        ctx.cache[self.cache_key] = (batch, (sv, extra))
        return sv, extra


def prm_reward(path, *, kind: str = "auto", positive_label: int | str | None = None, tokenizer=None,
               device: str = "cpu", dtype: torch.dtype = torch.float32, batch_size: int = 16,
               lam: float | None = None, name: str = "prm"):
    """A process reward scored by a classification model (see the module docstring).

    Parameters
    ----------
    path : str or Path
        Hub id or folder of a ``*ForTokenClassification`` / ``*ForSequenceClassification`` model.
    kind : {"auto", "token", "sequence"}
        Which head to load; ``auto`` reads the config's ``architectures``.
    positive_label : int or str, optional
        Label whose probability is V_s (index or ``label2id`` name); default 1, or the sigmoid
        of a single logit.
    tokenizer : transformers tokenizer, optional
        Default: ``AutoTokenizer.from_pretrained(path)``.
    device, dtype
        Where the PRM runs.
    batch_size : int
        Sequences per forward pass (right-padded).
    lam : float in [0, 1], optional
        lam * A(prm) + (1 - lam) * A(outcome); None: PRM only.
    name : str
        Reported name; register the reward under it to use it by name
        (``register_reward(name)(prm_reward(path))``).

    Returns
    -------
    Reward
        ``reward(batch, ctx) -> RewardOutput``: ``advantages`` (N, T) float64,
        ``generated_tokens`` {}, ``stats`` with ``prm_tokens``, ``prm_flops``, ``prm_seconds``.

    Raises
    ------
    NotAClassificationModelError
        The path holds another kind of model (checked before anything is generated).
    ValueError
        Bad ``kind``, ``positive_label``, ``batch_size`` or ``lam``.
    OSError
        The path cannot be read (transformers' error).
    """
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"PRM batch_size must be a positive int, got {batch_size!r}")
    make_process_reward(lam=lam)  # the same check of lam as the process hybrids
    scorer = _PRMScorer.load(path, kind=kind, positive_label=positive_label, tokenizer=tokenizer, device=device,
                             dtype=dtype, batch_size=batch_size)

    def reward(batch: RolloutBatch, ctx: RewardContext) -> RewardOutput:
        sv, extra = scorer.step_values(batch, ctx)
        adv, valid, stats = mc_value_advantages(sv, batch.completion_mask)
        stats = {**stats, **extra, "num_steps": sum(sv.num_steps) / max(sv.num_rows, 1)}
        if lam is not None:
            out = outcome_reward(batch, ctx)
            adv, valid = hybrid_advantages(adv, valid, out.advantages, out.valid, float(lam))
            stats = {**stats, "lambda": float(lam), "missing": int((~valid).sum()),
                     "zero_variance_groups_outcome": out.stats["zero_variance_groups"],
                     **hybrid_overflow_stats(stats, out.stats, float(lam))}
        return RewardOutput(name=name, advantages=adv, valid=valid, generated_tokens={}, stats=stats)

    reward.__name__ = reward.__qualname__ = f"prm_{name}".replace(".", "")
    reward.__doc__ = (f"Process reward from the {scorer.kind}-classification PRM {str(path)!r} "
                      "(gradprobe.rewards.prm).")
    reward.model, reward.tokenizer, reward.kind = scorer.model, scorer.tokenizer, scorer.kind
    return reward
