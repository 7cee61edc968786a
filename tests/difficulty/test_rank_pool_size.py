"""Huge pools: ``rank-prompts --pool 10000000`` printed nothing for 100 s while memory grew to 3.5 GB (the task
generating ten million problems, about 1.5 KB each), and ``--pool 20000`` spent 87 s in the feature forward without a
progress bar. Now a pool over a plan's limit is refused before anything is built, the building, encoding and feature
forward show progress, and the feature matrix is never held whole (chunks of the pool are predicted and dropped;
the prompts' tokens are packed, 4 bytes each)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import gradprobe
import gradprobe.difficulty.rank_pool as rank_pool
from gradprobe.cli import main
from gradprobe.difficulty.features import hidden_features
from gradprobe.difficulty.pool_stream import encode_pool
from gradprobe.difficulty.rank import MAX_POOL, RankSettings, rank_prompts
from gradprobe.ledger import Ledger, forward_flops_per_token
from gradprobe.models import load_policy
from gradprobe.tasks import load_task
from gradprobe.tasks.prompts import encode_prompt
from gradprobe.training.plan_checks import MAX_POOL as PLAN_MAX_POOL

from helpers_rollout import one_thread

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)  # tiny models: one thread

ARGS = ["--model", "tiny-qwen2", "--task", "chain_sum", "--max-new-tokens", "4"]


def test_the_limit_is_a_plans():
    assert MAX_POOL is PLAN_MAX_POOL and MAX_POOL == 1_000_000  # one constant (gradprobe.config)


@pytest.mark.parametrize("command", ["rank-prompts", "difficulty-eval"])
def test_a_pool_over_the_limit_is_refused_before_anything_is_built(tmp_path, capsys, command):
    out = tmp_path / "x"
    # a task that does not exist and a model that does not exist: the pool is refused before either is looked up
    assert main([command, "--model", "no-such-model", "--task", "no_such_task", "--pool", "10000000",
                 "--out", str(out)]) == 2
    assert not out.exists()
    assert capsys.readouterr().err == (
        f"gradprobe {command}: error: pool (--pool) = 10,000,000 is more than 1,000,000 prompts: every prompt of the "
        "pool is built in memory and read by the feature forward before anything is ranked, so a pool this large "
        "would not finish; give --pool at most 1,000,000 (a few thousand is the usual size), as a plan's [task] pool\n")
    with pytest.raises(ValueError, match=r"^pool \(--pool\) = 1,000,001 is more than 1,000,000 prompts"):
        gradprobe.rank_prompts("no-such-model", "no_such_task", MAX_POOL + 1)


def test_building_encoding_and_the_feature_forward_show_progress_unless_hidden(tmp_path, capsys):
    assert main(["rank-prompts", *ARGS, "--pool", "6", "--fit-prompts", "2", "--probe-samples", "1",
                 "--resamples", "5", "--out", str(tmp_path / "a")]) == 0
    err = capsys.readouterr().err
    assert "rank-prompts: building the pool of 6 prompts: 00:0" in err  # seconds: the task builds it in one call
    for bar, total in (("encoding 6 prompts", 6), ("features of 2 fit prompts", 2), ("features of 4 pool prompts", 4)):
        assert re.search(rf"rank-prompts: {bar}: +\d+%\|[^|]*\| *\d+/{total} \[", err), bar  # tqdm: done/total [
    assert main(["difficulty-eval", *ARGS, "--pool", "6", "--samples", "2", "--resamples", "5",
                 "--out", str(tmp_path / "b")]) == 0
    err = capsys.readouterr().err
    assert "difficulty-eval: building the pool of 6 prompts: 00:0" in err
    assert re.search(r"difficulty-eval: features of 6 prompts: +\d+%\|[^|]*\| *\d+/6 \[", err)
    assert main(["rank-prompts", *ARGS, "--pool", "6", "--fit-prompts", "2", "--probe-samples", "1",
                 "--resamples", "5", "--no-progress", "--out", str(tmp_path / "c")]) == 0
    err = capsys.readouterr().err
    assert "building" not in err and "features of" not in err and "encoding" not in err


def test_the_feature_matrix_is_never_held_whole_and_chunks_give_the_same_ranking(monkeypatch):
    settings = RankSettings(fit_prompts=3, probe_samples=2, max_new_tokens=4, resamples=10, no_progress=True)
    whole = rank_prompts("tiny-qwen2", "chain_sum", 11, settings=settings)
    sizes, real = [], rank_pool.pool_features

    def spy(policy, problems, packed, rows, **kw):
        sizes.append(len(rows))
        return real(policy, problems, packed, rows, **kw)

    monkeypatch.setattr(rank_pool, "CHUNK", 4)
    monkeypatch.setattr(rank_pool, "pool_features", spy)
    chunked = rank_prompts("tiny-qwen2", "chain_sum", 11, settings=settings)
    assert sizes[0] == 3 and max(sizes[1:]) <= 4 and sum(sizes) == 11  # fit prompts, then chunks of at most 4
    assert list(chunked.prompt_id) == list(whole.prompt_id)
    np.testing.assert_allclose(chunked.p_hat, whole.p_hat, rtol=1e-9)
    np.testing.assert_allclose(chunked.p_model, whole.p_model, rtol=1e-9)
    assert chunked.attrs["ledger"]["generated_tokens"] == whole.attrs["ledger"]["generated_tokens"]


def test_the_pool_is_encoded_once_and_packed_four_bytes_a_token():
    policy = load_policy("tiny-qwen2")
    problems = load_task("chain_sum").problems("train", 7)
    packed = encode_pool(policy.tokenizer, problems)
    lists = [encode_prompt(policy.tokenizer, p.question) for p in problems]
    assert packed.tokens.dtype == np.int32 and packed.total == sum(map(len, lists)) == packed.tokens.nbytes // 4
    assert len(packed) == 7 and [packed[i].tolist() for i in range(7)] == lists == [t.tolist() for t in packed]


def test_the_feature_forward_reports_each_batch_and_charges_the_ledger_per_prompt():
    policy = load_policy("tiny-qwen2")
    prompts = [[5, 6, 7], [8] * 9, [9, 10], [11] * 4, [12]]
    done, ledger = [], Ledger()
    hidden_features(policy, prompts, batch_size=2, ledger=ledger, on_batch=done.append)
    assert done == [2, 2, 1]
    assert ledger.generated_tokens["selection"] == 19  # prompt tokens read (the selection category counts them)
    expected = sum(len(p) * forward_flops_per_token(policy.model, (len(p) + 1) / 2) for p in prompts)
    assert ledger.flops["selection"] == pytest.approx(expected, rel=1e-12)
