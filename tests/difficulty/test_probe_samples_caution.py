"""``rank-prompts --probe-samples 1`` cautions that one sample per prompt cannot place a prompt near 1/2 (trial 5,
/tmp/trial5/rank/rx2: every prompt probed once gave no note, while ``--fit-prompts 16`` did; p_model repeated each
single 0/1 outcome and "nearest 1/2" was p_hat 0.206)."""

from __future__ import annotations

import json

import pytest

from gradprobe.cli import main

from helpers_rollout import one_thread

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)  # tiny models: one thread

ONE = ("each of the 32 probed prompts was sampled once (--probe-samples 1), so its estimate rests on one Bernoulli "
       "draw (success 0 or 1): p_hat of a probed prompt follows that one outcome and the ranking cannot place a "
       "prompt near 1/2 (one draw cannot tell a prompt solved half the time from one always or never solved); use "
       "--probe-samples 4 or more (the default 4)")


def _rank(out, samples: int, capsys):
    rc = main(["rank-prompts", "--model", "tiny-qwen2", "--task", "chain_sum:min_terms=2,max_terms=3", "--pool", "32",
               "--fit-prompts", "32", "--probe-samples", str(samples), "--max-new-tokens", "4", "--out", str(out)])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    return json.loads((out / "rank.json").read_text()), cap.out


def test_one_probe_sample_per_prompt_is_cautioned_with_the_fix(tmp_path, capsys):
    info, stdout = _rank(tmp_path / "one", 1, capsys)
    assert info["fit_prompts"] == 32 and info["settings"]["probe_samples"] == 1  # every prompt probed, as in rx2
    assert info["notes"] == [ONE]
    assert f"note: {ONE}\n" in stdout


def test_two_probe_samples_on_32_fit_prompts_give_no_note(tmp_path, capsys):
    info, stdout = _rank(tmp_path / "two", 2, capsys)
    assert info["notes"] == [] and "note:" not in stdout
