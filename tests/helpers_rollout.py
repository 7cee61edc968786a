"""Test helpers for tests/rollout and tests/rewards: a fake task, a fake sampler, small batches."""

from __future__ import annotations

from gradprobe.char_tokenizer import char_tokenizer
from gradprobe.config import SamplingConfig
from gradprobe.rollout.base import Sample, cut_at_eos, per_prompt_budgets
from gradprobe.rollout.collect import build_batch
from gradprobe.tasks.base import Problem

EOS = 2  # char tokenizer: pad 0, bos 1, eos 2


class FakeTask:
    """Scores 1.0 iff the completion contains ``marker`` (default "7"); raises on ``"BOOM"``."""

    name = "fake"

    def __init__(self, marker: str = "7"):
        self.marker = marker
        self.calls = 0

    def score(self, completion: str, problem) -> float:
        self.calls += 1
        if "BOOM" in completion:
            raise RuntimeError("verifier exploded")
        return 1.0 if self.marker in completion else 0.0

    def format_rate(self, completion: str) -> bool:
        return "####" in completion


class FakeSampler:
    """Deterministic sampler: continues every prompt to ``total_length`` tokens.

    Sample k of a prompt is made of ``fill[k % len(fill)]`` repeated, so with
    ``fill=("7", "z")`` half the continuations of a prefix contain a 7. Honours per-prompt
    budgets and records every call as ``(prompts, num_samples, budgets)``.
    """

    def __init__(self, tokenizer, total_length: int, fill=("7", "z"), eos: int | None = None):
        self.tokenizer = tokenizer
        self.total_length = total_length
        self.fill_ids = [tokenizer.convert_tokens_to_ids(c) for c in fill]
        self.eos = eos
        self.calls: list[tuple[list[list[int]], int, list[int]]] = []

    def sample(self, prompts, *, num_samples, sampling: SamplingConfig, max_new_tokens=None, desc=None):
        budgets = per_prompt_budgets(max_new_tokens, len(prompts), sampling.max_new_tokens)
        self.calls.append(([list(p) for p in prompts], num_samples, budgets))
        out = []
        for p, b in zip(prompts, budgets):
            for k in range(num_samples):
                n = max(self.total_length - len(p), 0)
                ids = [self.fill_ids[k % len(self.fill_ids)]] * n
                if self.eos is not None:
                    ids = ids + [self.eos]
                out.append(cut_at_eos(ids, [EOS] if self.eos is None else [self.eos], b) if b > 0
                           else Sample([], True))
        return out


def problems(b: int) -> list[Problem]:
    return [Problem(id=f"fake/train/{i}", question=f"q{i}", answer=str(i), metadata={"index": i}) for i in range(b)]


def char_ids(tok, text: str) -> list[int]:
    return tok.encode(text, add_special_tokens=False)


def make_batch(texts: list[str], *, group_size: int, scores=None, prompts: list[str] | None = None,
               eos_rows=(), truncated_rows=(), tokenizer=None):
    """A RolloutBatch from completion texts (char tokenizer); rows in ``eos_rows`` get an EOS appended."""
    tok = tokenizer or char_tokenizer()
    b = len(texts) // group_size
    prompts = prompts or [f"P{i}:" for i in range(b)]
    prompt_ids = [[1] + char_ids(tok, p) for p in prompts]
    samples = []
    for n, t in enumerate(texts):
        ids = char_ids(tok, t) + ([EOS] if n in eos_rows else [])
        samples.append(Sample(ids, truncated=n in truncated_rows))
    return build_batch(tok, problems(b), prompt_ids, samples, group_size=group_size, temperature=1.0, scores=scores)


def one_thread():
    """Generator for a module fixture: tiny models run faster on one thread (no OpenMP wake-ups)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
