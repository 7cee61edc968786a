"""The settings of ``gradprobe rank-prompts`` / ``gradprobe.rank_prompts`` live once
(:class:`gradprobe.difficulty.rank.RankSettings`): the command's flags default to them, and a bad
value is refused before any compute with a message naming the setting and its flag."""

from __future__ import annotations

import argparse

import pytest

from gradprobe.cli.difficulty import add_difficulty_parsers
from gradprobe.difficulty.rank import PoolSettings, RankSettings, rank_prompts


def _parse(argv):
    parser = argparse.ArgumentParser()
    add_difficulty_parsers(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def test_the_flags_default_to_the_settings_defaults():
    base = ["--model", "m", "--task", "t", "--pool", "3", "--out", "o"]
    assert RankSettings.from_args(_parse(["rank-prompts", *base])) == RankSettings()
    assert PoolSettings.from_args(_parse(["difficulty-eval", *base])) == PoolSettings()
    assert RankSettings().probe_samples == 4 and RankSettings().fit_prompts == 64 and PoolSettings().decay == 0.9
    flags = _parse(["rank-prompts", *base, "--probe-samples", "7", "--metadata-keys", "a,b", "--no-progress"])
    settings = RankSettings.from_args(flags)
    assert (settings.probe_samples, settings.keys, settings.no_progress) == (7, ("a", "b"), True)


@pytest.mark.parametrize("options, message", [
    ({"probe_samples": 0}, "probe_samples (--probe-samples) must be >= 1, got 0"),
    ({"fit_prompts": 2.5}, "fit_prompts (--fit-prompts) must be an integer, got 2.5"),
    ({"seed": True}, "seed (--seed) must be an integer, got True"),
    ({"temperature": "hot"}, "temperature (--temperature) must be a number, got 'hot'"),
    ({"dtype": "int8"}, "dtype (--dtype) must be one of float32, float64, bfloat16, float16, got 'int8'"),
    ({"no_progress": 1}, "no_progress (--no-progress) must be True or False, got 1"),
    ({"metadata_keys": 3}, "metadata_keys (--metadata-keys) must be comma-separated keys or a list of keys, got 3"),
    ({"samples": 2}, "unknown rank_prompts setting 'samples'; valid: batch_size, data_seed, decay, device, dtype, "
                     "feature_batch_size, fit_prompts, max_new_tokens, metadata_keys, no_progress, prior_strength, "
                     "probe_samples, resamples, seed, skip_malformed, temperature"),
])
def test_bad_settings_are_named_with_their_flag(options, message):
    with pytest.raises(ValueError) as info:
        RankSettings.from_options(options)
    assert str(info.value) == message


def test_settings_are_normalized():
    s = RankSettings.from_options({"metadata_keys": ["num_terms", "x"], "prior_strength": 2, "seed": 3})
    assert s.metadata_keys == "num_terms,x" and s.keys == ("num_terms", "x")
    assert s.prior_strength == 2.0 and isinstance(s.prior_strength, float) and s.seed == 3


def test_a_bad_pool_is_refused_before_anything_is_created(tmp_path):
    with pytest.raises(ValueError, match=r"pool \(--pool\) must be an integer >= 1, got 0"):
        rank_prompts("no-such-model", "chain_sum", 0, out=tmp_path / "o")
    assert not (tmp_path / "o").exists()
