"""Test helpers for the probe: float64-exact tiny models and hand-built rollout batches.

Test files import it as ``import probe_helpers as h`` (tests/ is on ``sys.path`` through
``pythonpath = ["tests"]`` in pyproject.toml's ``[tool.pytest.ini_options]``).
"""

from __future__ import annotations

import functools
import types

import pytest
import torch

from gradprobe.types import RolloutBatch

try:
    from gradprobe.tasks.base import Problem
except ImportError:  # the tasks package is written concurrently; RolloutBatch only stores problems
    from dataclasses import dataclass, field

    @dataclass(frozen=True)
    class Problem:
        id: str
        question: str
        answer: str
        metadata: dict = field(default_factory=dict, hash=False)


@pytest.fixture(autouse=True, scope="module")
def single_thread():
    """Run a test module's tiny models on one intra-op thread, then restore the setting.

    The probe tests use models of ~1e5 parameters, where threading only adds synchronisation; on a
    shared 2-core machine an oversubscribed thread pool made them ~50x slower. Test modules
    activate it with ``single_thread = h.single_thread``.
    """
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def _exact_rms_norm(self, hidden_states):
    # transformers' Qwen2/Llama RMSNorm computes in float32; this one keeps the input dtype
    variance = hidden_states.pow(2).mean(-1, keepdim=True)
    return self.weight * (hidden_states * torch.rsqrt(variance + self.variance_epsilon))


def patch_rms_norm(model):
    """Make every ``*RMSNorm`` module of ``model`` compute in its input dtype (float64-exact)."""
    n = 0
    for module in model.modules():
        if type(module).__name__.endswith("RMSNorm"):
            module.forward = types.MethodType(_exact_rms_norm, module)
            n += 1
    assert n > 0, "no RMSNorm module found"
    return model


def fresh_tiny_model(arch: str = "tiny-qwen2", dtype: str = "float64", seed: int = 0):
    """A new tiny model; float64 ones have the RMSNorm patch (float64-exact)."""
    from gradprobe.models import load_policy

    model = load_policy(arch, dtype=dtype, seed=seed).model
    if dtype == "float64":
        patch_rms_norm(model)
    return model


@functools.lru_cache(maxsize=None)
def tiny_model(arch: str = "tiny-qwen2", dtype: str = "float64", seed: int = 0):
    """A cached :func:`fresh_tiny_model`, shared by tests: never leave its parameters modified."""
    return fresh_tiny_model(arch, dtype, seed)


def random_direction(model, *, seed: int = 0, scale: float = 1.0) -> dict[str, torch.Tensor]:
    """A Gaussian parameter-space vector, each tensor scaled to the norm of its parameter times ``scale``."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for name, p in model.named_parameters():
        if p.requires_grad:
            r = torch.randn(p.shape, generator=g, dtype=torch.float64).to(p.dtype)
            out[name] = r * (scale * p.detach().norm() / r.norm().clamp(min=1e-30))
    return out


def make_batch(*, num_prompts: int = 3, group_size: int = 2, prompt_length: int = 6, completion_length: int = 7,
               vocab_size: int = 101, temperature: float = 0.7, seed: int = 0, pad_id: int = 0, eos_id: int = 2,
               scores=None) -> RolloutBatch:
    """A RolloutBatch of random tokens: left-padded prompts of ragged lengths (the same within a
    group), right-padded completions of ragged lengths (at least 1; some end with EOS), random
    scores in {0, 1} unless ``scores`` (N,) is given."""
    g = torch.Generator().manual_seed(seed)
    n = num_prompts * group_size
    p_len, t_len = prompt_length, completion_length
    input_ids = torch.full((n, p_len + t_len), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((n, p_len + t_len), dtype=torch.long)
    completion_mask = torch.zeros((n, t_len), dtype=torch.bool)
    prompt_token_ids = []
    for i in range(num_prompts):
        lp = int(torch.randint(2, p_len + 1, (1,), generator=g)) if i else p_len  # one full-length prompt
        prompt = torch.randint(4, vocab_size, (lp,), generator=g)
        prompt[0] = 1  # BOS
        prompt_token_ids.append(prompt.tolist())
        for j in range(group_size):
            r = i * group_size + j
            input_ids[r, p_len - lp:p_len] = prompt
            attention_mask[r, p_len - lp:p_len] = 1
            lc = t_len if r == 1 else int(torch.randint(1, t_len + 1, (1,), generator=g))  # one full-length row
            comp = torch.randint(4, vocab_size, (lc,), generator=g)
            if lc < t_len and r % 2 == 0:
                comp[-1] = eos_id
            input_ids[r, p_len:p_len + lc] = comp
            attention_mask[r, p_len:p_len + lc] = 1
            completion_mask[r, :lc] = True
    if scores is None:
        scores = torch.randint(0, 2, (n,), generator=g).double()
    return RolloutBatch(
        problems=[Problem(id=f"test/train/{i}", question=f"q{i}", answer="0") for i in range(num_prompts)],
        group_size=group_size, input_ids=input_ids, attention_mask=attention_mask, prompt_length=p_len,
        completion_mask=completion_mask, completions=["x"] * n, truncated=torch.zeros(n, dtype=torch.bool),
        scores=torch.as_tensor(scores, dtype=torch.float64), temperature=temperature,
        prompt_token_ids=prompt_token_ids)


def random_advantages(batch: RolloutBatch, *, seed: int = 0, per_token: bool = True) -> torch.Tensor:
    """Random advantages (N, T) in float64, zero off the completion mask."""
    g = torch.Generator().manual_seed(seed)
    n, t = batch.completion_mask.shape
    a = torch.randn((n, t) if per_token else (n, 1), generator=g, dtype=torch.float64).expand(n, t)
    return torch.where(batch.completion_mask, a, torch.zeros((), dtype=torch.float64))
