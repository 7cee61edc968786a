"""collect_rollouts: encoding, scoring (with scorer errors), ledger charges, empty completions."""

import logging
import math

import pytest

from gradprobe.config import SamplingConfig
from gradprobe.ledger import Ledger
from gradprobe.models import load_policy
from gradprobe.rollout import HFSampler, Sample, collect_rollouts
from gradprobe.tasks.prompts import encode_prompt

from helpers_rollout import FakeTask, one_thread, problems

_threads = pytest.fixture(scope="module", autouse=True)(one_thread)


@pytest.fixture(scope="module")
def policy():
    return load_policy("tiny-qwen2")


class ScriptedSampler:
    """Returns fixed samples (prompt-major) and records the call."""

    def __init__(self, samples):
        self.samples = samples
        self.calls = []

    def sample(self, prompts, *, num_samples, sampling, max_new_tokens=None, desc=None):
        self.calls.append((prompts, num_samples, desc))
        return self.samples


def test_scores_errors_masks_and_ledger(policy, caplog):
    tok = policy.tokenizer
    ids = lambda s: tok.encode(s, add_special_tokens=False)  # noqa: E731
    samples = [Sample(ids("7 ok") + [2], False), Sample(ids("BOOM"), True),  # problem 0
               Sample([], True), Sample([2], False)]  # problem 1: empty, immediate EOS
    sampler = ScriptedSampler(samples)
    ledger = Ledger()
    with caplog.at_level(logging.WARNING):
        batch = collect_rollouts(policy, FakeTask(), problems(2), group_size=2, sampler=sampler,
                                 sampling=SamplingConfig(max_new_tokens=4), ledger=ledger)
    prompts, k, _ = sampler.calls[0]
    assert k == 2 and prompts == [encode_prompt(tok, "q0"), encode_prompt(tok, "q1")]
    assert batch.completions == ["7 ok", "BOOM", "", ""]
    assert batch.scores[0] == 1.0 and math.isnan(batch.scores[1]) and batch.scores[2:].tolist() == [0.0, 0.0]
    assert batch.metadata["score_errors"] == 1
    assert "verifier exploded" in caplog.text
    assert batch.completion_mask.sum(-1).tolist() == [5, 4, 0, 1]
    assert not batch.completion_mask[2].any()
    assert batch.truncated.tolist() == [False, True, True, False]
    assert ledger.generated_tokens["rollout"] == 10 == batch.generated_tokens
    assert ledger.device_seconds["generation"] >= 0 and "eval" not in ledger.device_seconds


def test_hf_rollouts_eval_category(policy):
    sampler = HFSampler(policy, seed=0, progress=False)
    ledger = Ledger()
    batch = collect_rollouts(policy, FakeTask(), problems(2), group_size=3, sampler=sampler,
                             sampling=SamplingConfig(max_new_tokens=8, batch_size=16), ledger=ledger,
                             category="eval")
    assert batch.num_rows == 6 and batch.completion_mask.shape[1] <= 8
    assert ledger.generated_tokens["eval"] == batch.generated_tokens == sampler.generated_tokens
    assert ledger.generated_tokens["rollout"] == 0 and ledger.charged_tokens == 0
    assert ledger.device_seconds["eval"] > 0 and "generation" not in ledger.device_seconds
    assert batch.metadata["sampler"] == "HFSampler" and batch.metadata["score_errors"] == 0
    with pytest.raises(ValueError, match="category"):
        collect_rollouts(policy, FakeTask(), problems(1), group_size=1, sampler=sampler,
                         sampling=SamplingConfig(max_new_tokens=2), ledger=ledger, category="nope")
