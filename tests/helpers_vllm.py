"""A fake vLLM engine for tests (tests/rollout/test_vllm_sampler.py, tests/test_gpu_check.py): vLLM's
``LLM`` surface as :class:`gradprobe.rollout.vllm_sampler.VLLMSampler` uses it, without vLLM."""

from __future__ import annotations

import random
from types import SimpleNamespace

import torch

EOS = 2  # char tokenizer: pad 0, bos 1, eos 2


class FakeModule:
    """Stands in for the engine's nn.Module: records ``load_weights``."""

    def __init__(self):
        self.loaded: list[tuple[str, torch.Tensor]] = []

    def load_weights(self, weights):
        self.loaded.extend((n, t.clone()) for n, t in weights)
        return {n for n, _ in self.loaded}


class FakeLLM:
    """vLLM's ``LLM`` surface as the sampler uses it, with vLLM's semantics.

    Each request's completion k is drawn from ``random.Random(seed + k)`` (vLLM gives child k of
    an n-request the seed ``seed + k``): tokens in [3, 40), EOS (2) with probability ``p_eos``,
    stop on ``stop_token_ids`` (the stop token kept in ``token_ids``), at most ``max_tokens``.
    The log-probability of the t-th token is ``-(t + 1) / 10 - weight_version``; greedy
    requests (temperature 0) repeat token 5. ``in_process=False`` hides the worker model so
    the sampler must use ``apply_model``.
    """

    def __init__(self, p_eos=0.2, in_process=True):
        self.p_eos = p_eos
        self.calls = []
        self.resets = 0
        self.version = 0
        self.module = FakeModule()
        self.applied = []
        if in_process:
            runner = SimpleNamespace(model=self.module)
            self.llm_engine = SimpleNamespace(model_executor=SimpleNamespace(driver_worker=SimpleNamespace(
                model_runner=runner)))

    def generate(self, prompts, sampling_params=None, use_tqdm=True):
        self.calls.append((prompts, sampling_params))
        results = []
        for req, sp in zip(prompts, sampling_params):
            outputs = []
            for k in range(sp["n"]):
                rng = random.Random(sp["seed"] + k)
                ids, finish = [], "length"
                for _ in range(sp["max_tokens"]):
                    if sp["temperature"] == 0:
                        tok = 5
                    else:
                        tok = EOS if rng.random() < self.p_eos else rng.randrange(3, 40)
                    ids.append(tok)
                    if tok in sp["stop_token_ids"]:
                        finish = "stop"
                        break
                lps = [{tok: SimpleNamespace(logprob=-(t + 1) / 10 - self.version, rank=1)} for t, tok in enumerate(ids)]
                outputs.append(SimpleNamespace(index=k, token_ids=ids, logprobs=lps, finish_reason=finish))
            outputs.reverse()  # the sampler must order by index, not trust the list order
            results.append(SimpleNamespace(prompt_token_ids=req["prompt_token_ids"], outputs=outputs))
        return results

    def reset_prefix_cache(self):
        self.resets += 1
        self.version += 1
        return True

    def apply_model(self, fn):
        self.applied.append(fn)
        return [fn(self.module)]


def install_fake_engine(monkeypatch, p_eos: float = 0.3) -> list[FakeLLM]:
    """Make every ``VLLMSampler`` built without an engine (``make_sampler("vllm", ...)``, a plan's
    ``[sampling] backend = "vllm"``) get a :class:`FakeLLM`, by patching the real factory the sampler
    calls (``gradprobe.rollout.vllm_sampler.build_engine``) and its parameters factory (plain dicts).
    Returns the list the engines are appended to, in build order."""
    import gradprobe.rollout.vllm_sampler as vs

    engines: list[FakeLLM] = []

    def fake_engine(policy, seed=0, **kw):
        engines.append(FakeLLM(p_eos=p_eos))
        return engines[-1]

    monkeypatch.setattr(vs, "build_engine", fake_engine)
    monkeypatch.setattr("gradprobe.config.vllm_installed", lambda: True)  # the fake stands in for it
    monkeypatch.setattr(vs, "_default_params_factory", lambda: dict)
    return engines
