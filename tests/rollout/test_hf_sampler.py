"""The sampler backends on a random tiny Qwen2: shapes, EOS/truncation, determinism, padding invariance.

Every test runs against ``hf`` (batched ``generate``) and ``hf_paged`` (transformers' continuous
batching, :class:`~gradprobe.rollout.hf_paged.HFPagedSampler`), through the backend registry
:func:`gradprobe.rollout.make_sampler`: the two must keep the same contract. Their samples for a
seed differ (different batches draw the random numbers), so no test compares one with the other.
"""

import dataclasses

import pytest
import torch

from gradprobe.config import SamplingConfig
from gradprobe.logprobs import token_logprobs
from gradprobe.models import load_policy
from gradprobe.rollout import PromptTooLongError, Sample, build_batch, make_sampler
from gradprobe.tasks.base import Problem

from helpers_rollout import one_thread

MAX_NEW = 24
_threads = pytest.fixture(scope="module", autouse=True)(one_thread)


@pytest.fixture(scope="module")
def policy():
    p = load_policy("tiny-qwen2")
    tok = p.tokenizer
    # several EOS ids (like models with <|im_end|> and <|endoftext|>): a random model then ends often
    extra = [tok.convert_tokens_to_ids(c) for c in "e "]
    return dataclasses.replace(p, eos_token_ids=p.eos_token_ids + extra)


@pytest.fixture(scope="module")
def prompts(policy):
    tok = policy.tokenizer
    return [[1] + tok.encode(t, add_special_tokens=False) for t in ("Hi", "What is 2+3?", "Add 17 and 4, please.")]


SAMPLING = SamplingConfig(temperature=1.0, max_new_tokens=MAX_NEW, batch_size=5)
BACKENDS = ["hf", "hf_paged"]
backends = pytest.mark.parametrize("backend", BACKENDS)


def sampler_of(backend, policy, **kw):
    return make_sampler(backend, policy, progress=False, **kw)


@backends
def test_shapes_eos_and_truncation(backend, policy, prompts):
    sampler = sampler_of(backend, policy, seed=3)
    out = sampler.sample(prompts, num_samples=4, sampling=SAMPLING)
    assert len(out) == 12 and all(isinstance(s, Sample) for s in out)
    eos = set(policy.eos_token_ids)
    ended = 0
    for s in out:
        assert 1 <= len(s.token_ids) <= MAX_NEW
        hits = [k for k, t in enumerate(s.token_ids) if t in eos]
        if s.truncated:
            assert len(s.token_ids) == MAX_NEW and not hits
        else:
            assert hits == [len(s.token_ids) - 1]  # ends with its first (and only) EOS
            ended += 1
    assert 0 < ended < 12  # both cases occur for this seed
    assert sampler.generated_tokens == sum(len(s.token_ids) for s in out)
    assert sampler.calls == 1 and sampler.seconds > 0
    # the policy is left as it was
    assert policy.model.config._attn_implementation == "gradprobe_eager"
    assert policy.model.generation_config.eos_token_id == 2


@backends
def test_determinism_and_rng_isolation(backend, policy, prompts):
    state = torch.get_rng_state()
    a = sampler_of(backend, policy, seed=7)
    b = sampler_of(backend, policy, seed=7)
    first_a = a.sample(prompts, num_samples=2, sampling=SAMPLING)
    first_b = b.sample(prompts, num_samples=2, sampling=SAMPLING)
    assert first_a == first_b
    second_a = a.sample(prompts, num_samples=2, sampling=SAMPLING)
    assert second_a != first_a  # seed + call counter
    assert torch.equal(torch.get_rng_state(), state)  # global RNG untouched
    g1 = a.sample(prompts, num_samples=2, sampling=SAMPLING, greedy=True)
    g2 = b.sample(prompts, num_samples=2, sampling=SAMPLING, greedy=True)
    assert g1 == g2 and g1[0] == g1[1]  # greedy: identical samples of a prompt


@backends
def test_pad_id_does_not_change_samples_and_first_eos_is_kept(backend, prompts):
    base = load_policy("tiny-qwen2")
    tok = base.tokenizer
    extra = [tok.convert_tokens_to_ids(c) for c in "e "]
    p1 = dataclasses.replace(base, eos_token_ids=[2] + extra)
    out1 = sampler_of(backend, p1, seed=1).sample(prompts, num_samples=3, sampling=SAMPLING)
    other = load_policy("tiny-qwen2")
    other.tokenizer.pad_token = other.tokenizer.eos_token  # pad == eos (SmolLM2)
    assert other.tokenizer.pad_token_id == 2
    p2 = dataclasses.replace(other, eos_token_ids=[2] + extra)
    out2 = sampler_of(backend, p2, seed=1).sample(prompts, num_samples=3, sampling=SAMPLING)
    assert out1 == out2
    ended = [s for s in out2 if not s.truncated]
    assert ended and all(s.token_ids[-1] in p2.eos_token_ids for s in ended)


@backends
def test_per_prompt_budgets_and_zero(backend, policy, prompts):
    sampler = sampler_of(backend, policy, seed=0)
    out = sampler.sample(prompts, num_samples=2, sampling=SAMPLING, max_new_tokens=[3, 0, 6])
    assert [len(s.token_ids) <= b for s, b in zip(out, [3, 3, 0, 0, 6, 6])] == [True] * 6
    assert out[2] == Sample([], True) and out[3] == Sample([], True)
    assert all(s.truncated == (len(s.token_ids) == b and not set(s.token_ids) & set(policy.eos_token_ids))
               for s, b in zip(out, [3, 3, 0, 0, 6, 6]))
    with pytest.raises(ValueError, match="budgets"):
        sampler.sample(prompts, num_samples=1, sampling=SAMPLING, max_new_tokens=[3, 4])


@backends
def test_left_padded_logprobs_equal_each_row_alone(backend, policy, prompts):
    out = sampler_of(backend, policy, seed=5).sample(prompts, num_samples=1, sampling=SAMPLING)
    probs = [Problem(id=f"p{i}", question="", answer="") for i in range(3)]
    batch = build_batch(policy.tokenizer, probs, prompts, out, group_size=1, temperature=0.8)
    assert batch.attention_mask[0, 0] == 0  # the short prompt is left-padded
    with torch.no_grad():
        full = token_logprobs(policy.model, batch.input_ids, batch.attention_mask, batch.prompt_length,
                              temperature=0.8)
        for n in range(3):
            alone = build_batch(policy.tokenizer, probs[:1], prompts[n:n + 1], out[n:n + 1], group_size=1,
                                temperature=0.8)
            single = token_logprobs(policy.model, alone.input_ids, alone.attention_mask, alone.prompt_length,
                                    temperature=0.8)
            k = len(out[n].token_ids)
            torch.testing.assert_close(full[n, :k], single[0, :k], atol=1e-5, rtol=1e-5)


@backends
def test_prompt_too_long(backend, policy):
    sampler = sampler_of(backend, policy)
    prompts = [[1] * 10, [1] * 1000]
    with pytest.raises(PromptTooLongError) as e:
        sampler.sample(prompts, num_samples=2, sampling=SAMPLING, max_new_tokens=30)
    assert str(e.value) == ("prompt 1 (of this call's 2) has 1000 tokens; with max_new_tokens=30 that is 1030 > the "
                            "model's max_position_embeddings=1024. Lower max_new_tokens to at most 24 or shorten the "
                            "prompt.")
    assert isinstance(e.value, ValueError)
    with pytest.raises(PromptTooLongError) as e:  # the prompt alone fills the context: "at most 0" was no fix
        sampler.sample([[1] * 1024], num_samples=1, sampling=SAMPLING, max_new_tokens=8)
    assert str(e.value).endswith("1032 > the model's max_position_embeddings=1024. The prompt alone leaves no room "
                                 "for a completion: shorten it or leave it out of the prompt pool.")
    with pytest.raises(ValueError, match="empty"):
        sampler.sample([[]], num_samples=1, sampling=SAMPLING)


# --- hf_paged only: what the paged backend adds ------------------------------------------------


def test_paged_logprobs_are_the_policy_at_the_temperature(policy, prompts):
    """The manager's sampler log-probs (logprobs=True) equal the training forward's at T=0.7."""
    sampling = SamplingConfig(temperature=0.7, max_new_tokens=MAX_NEW)
    out = sampler_of("hf_paged", policy, seed=2, logprobs=True).sample(prompts, num_samples=2, sampling=sampling)
    from gradprobe.rollout.vllm_sampler import sampler_logprobs

    probs = [Problem(id=f"p{i}", question="", answer="") for i in range(3)]
    batch = build_batch(policy.tokenizer, probs, prompts, out, group_size=2, temperature=0.7)
    with torch.no_grad():
        train = token_logprobs(policy.model, batch.input_ids, batch.attention_mask, batch.prompt_length,
                               temperature=0.7)
    sampler = sampler_logprobs(out, batch.completion_mask.shape[1])
    mask = batch.completion_mask
    assert torch.isfinite(sampler[mask]).all() and torch.isnan(sampler[~mask]).all()
    torch.testing.assert_close(sampler[mask], train[mask].float(), atol=2e-4, rtol=1e-4)
    # and not the temperature-1 log-probs (the check can tell the two apart)
    with torch.no_grad():
        t1 = token_logprobs(policy.model, batch.input_ids, batch.attention_mask, batch.prompt_length, temperature=1.0)
    assert (sampler[mask] - t1[mask].float()).abs().max() > 1e-2


def test_paged_forks_one_request_per_prompt(policy, prompts, monkeypatch):
    """The K samples of a prompt are one request with K - 1 forked children (one prefill per prompt);
    budgets of 0 send no request."""
    added = []
    model = policy.model
    original = type(model).init_continuous_batching

    def spy(self, *args, **kwargs):
        manager = original(self, *args, **kwargs)
        add = manager.add_request

        def add_request(input_ids, **kw):
            added.append((list(input_ids), kw["max_new_tokens"], manager.num_return_sequences))
            return add(input_ids, **kw)

        manager.add_request = add_request
        return manager

    monkeypatch.setattr(type(model), "init_continuous_batching", spy)
    out = sampler_of("hf_paged", policy, seed=4).sample(prompts, num_samples=3, sampling=SAMPLING,
                                                       max_new_tokens=[5, 0, 7])
    assert added == [(prompts[0], 5, 3), (prompts[2], 7, 3)]
    assert len(out) == 9 and [len(s) <= b for s, b in zip(out, [5] * 3 + [0] * 3 + [7] * 3)] == [True] * 9
    assert len({tuple(s.token_ids) for s in out[6:]}) > 1  # the children sample their own tokens


def test_registry_names_and_errors(policy):
    from gradprobe.rollout import SAMPLERS, HFPagedSampler, HFSampler

    assert set(SAMPLERS) == {"hf", "hf_paged", "vllm"}
    assert type(make_sampler("hf", policy)) is HFSampler
    paged = make_sampler("hf_paged", policy, seed=5, max_batch_tokens=64, logprobs=True)
    assert isinstance(paged, HFPagedSampler) and paged.seed == 5
    again = paged.with_seed(9)
    assert (again.seed, again.max_batch_tokens, again.logprobs, again.calls) == (9, 64, True, 0)
    with pytest.raises(ValueError, match="hf_paged"):
        make_sampler("paged", policy)
    with pytest.raises(ValueError, match="page_size"):
        make_sampler("hf_paged", policy, page_size=2)
