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
import gradprobe.config as config
import gradprobe.difficulty.rank as rank
import gradprobe.difficulty.rank_pool as rank_pool
import gradprobe.training.plan_checks as plan_checks
from gradprobe.cli import main
from gradprobe.difficulty.features import hidden_features
from gradprobe.difficulty.pool_stream import encode_pool
from gradprobe.difficulty.rank import MAX_POOL, RankSettings, rank_prompts
from gradprobe.ledger import Ledger, forward_flops_per_token
from gradprobe.models import load_policy
from gradprobe.tasks import load_task
from gradprobe.tasks.base import TaskNotFoundError
from gradprobe.tasks.prompts import encode_prompt
from gradprobe.training.plan import parse_plan
from gradprobe.training.specs import PlanError

from helpers_rollout import one_thread
from helpers_training import tiny_plan

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)  # tiny models: one thread

ARGS = ["--model", "tiny-qwen2", "--task", "chain_sum", "--max-new-tokens", "4"]


def test_the_limit_is_a_plans(tmp_path, monkeypatch, capsys):
    """One constant, ``gradprobe.config.MAX_POOL`` (1,000,000 prompts), limits a plan's ``[task] pool`` and ``--pool``
    (rank-prompts, difficulty-eval, ``gradprobe.rank_prompts``): each checking module's name is config's object (a
    module with a copy of its own, ``MAX_POOL = 1_000_000``, holds another int object), and each check reads that name
    when it runs: with the name raised to 2,000,000 in both modules, a pool of 1,500,000 passes the pool checks (a
    limit written into a check, or kept under another name, would still refuse it) and one of 2,000,001 is refused."""
    assert config.MAX_POOL == 1_000_000
    assert {m.__name__: m.MAX_POOL is config.MAX_POOL for m in (rank, plan_checks)} == {
        "gradprobe.difficulty.rank": True, "gradprobe.training.plan_checks": True}
    for module in (rank, plan_checks):
        monkeypatch.setattr(module, "MAX_POOL", 2_000_000)
    assert parse_plan(tiny_plan(task={"pool": 1_500_000})).task.pool == 1_500_000  # parsing builds no pool
    with pytest.raises(PlanError, match=r"^task\.pool = 2000001 is more than 2,000,000 prompts: .* at most 2,000,000 "):
        parse_plan(tiny_plan(task={"pool": 2_000_001}))
    with pytest.raises(ValueError, match=r"^pool \(--pool\) = 2,000,001 is more than 2,000,000 prompts: "):
        gradprobe.rank_prompts("no-such-model", "no_such_task", 2_000_001)
    with pytest.raises(TaskNotFoundError, match="^unknown task 'no_such_task'"):  # past the pool check: the task
        gradprobe.rank_prompts("no-such-model", "no_such_task", 1_500_000)
    for command in ("rank-prompts", "difficulty-eval"):
        assert main([command, "--model", "no-such-model", "--task", "no_such_task", "--pool", "1500000",
                     "--out", str(tmp_path / command)]) == 2
        assert capsys.readouterr().err.startswith(f"gradprobe {command}: error: unknown task 'no_such_task'")
        assert not (tmp_path / command).exists()


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
                 "--resamples", "10", "--out", str(tmp_path / "a")]) == 0
    err = capsys.readouterr().err
    # a reasoning-gym pool's size is known: done/total [elapsed<ETA (gradprobe.difficulty.progress.pool_problems)
    assert re.search(r"rank-prompts: building the pool of 6 prompts: +\d+%\|[^|]*\| *\d/6 \[[\d:]+<[\d:?]+", err)
    for bar, total in (("encoding 6 prompts", 6), ("features of 2 fit prompts", 2), ("features of 4 pool prompts", 4)):
        assert re.search(rf"rank-prompts: {bar}: +\d+%\|[^|]*\| *\d+/{total} \[", err), bar  # tqdm: done/total [
    assert main(["difficulty-eval", *ARGS, "--pool", "6", "--samples", "2", "--resamples", "10",
                 "--out", str(tmp_path / "b")]) == 0
    err = capsys.readouterr().err
    assert re.search(r"difficulty-eval: building the pool of 6 prompts: +\d+%\|[^|]*\| *\d/6 \[[\d:]+<", err)
    assert re.search(r"difficulty-eval: features of 6 prompts: +\d+%\|[^|]*\| *\d+/6 \[", err)
    assert main(["rank-prompts", *ARGS, "--pool", "6", "--fit-prompts", "2", "--probe-samples", "1",
                 "--resamples", "10", "--no-progress", "--out", str(tmp_path / "c")]) == 0
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
