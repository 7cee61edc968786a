"""One training run on the random tiny model: budget stop, eval schedule, ledger, exact resume, bad input."""

from __future__ import annotations

import argparse
import errno
import json
import math
import sys
from pathlib import Path

import pytest
import torch

from gradprobe.models import load_policy
from gradprobe.rewards import REWARDS
from gradprobe.training import checkpoint as ckpt_mod
from gradprobe.training.checkpoint import OutputDirError
from gradprobe.training.plan import parse_plan
from gradprobe.training.metrics import logp_entropy, policy_stats
from gradprobe.cli.train import add_train_parser, train_main
from gradprobe.training.run import NonFiniteRunError, RunConfigMismatchError, pool_indices, run_training

from helpers_rollout import one_thread
from helpers_tasks import ScoredTask, exploding_reward

PLAN = """
seeds = [0]
[model]
name = "tiny-qwen2"
[task]
name = "chain_sum"
pool = 16
[heldout]
prompts = 6
[sampling]
max_new_tokens = 16
[train]
prompts_per_update = 2
group = 4
lr = 1e-3
micro_batch_size = 4
checkpoint_every = 2
[budget]
generated_tokens = 700
[eval]
every_tokens = 250
[arms.grpo]
reward = "outcome"
[arms.mc_value]
reward = "mc_value"
[arms.mc_value.mc]
continuations = 2
max_steps = 3
"""


_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)  # tiny models: one thread


class Killed(Exception):
    pass


@pytest.fixture(scope="module")
def task():
    return ScoredTask("digit3", train_size=16)


def _run(out, task, text=PLAN, arm="grpo", **kw):
    return run_training(parse_plan(text).arm(arm), out, policy=load_policy("tiny-qwen2"), task=task, **kw)


def _lines(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]


def _deterministic(line: dict) -> dict:
    """A metrics line without wall-clock fields."""
    out = {k: v for k, v in line.items() if "seconds" not in k}
    if "ledger" in out:
        out["ledger"] = {k: v for k, v in out["ledger"].items() if "seconds" not in k}
    return out


@pytest.fixture(scope="module")
def baseline(tmp_path_factory, task):
    out = tmp_path_factory.mktemp("baseline")
    summary = _run(out, task)
    return out, summary, _lines(out)


def test_stops_when_the_token_budget_is_spent_overshooting_by_less_than_one_update(baseline):
    out, summary, lines = baseline
    updates = [x for x in lines if not x.get("eval")]
    assert summary["completed"] and summary["stop_reason"] == "budget" and summary["budget_spent"] == "generated_tokens"
    assert summary["updates"] == len(updates) >= 3 and [x["update"] for x in updates] == list(range(1, len(updates) + 1))
    spent = summary["spent"]["generated_tokens"]
    assert spent >= 700 and updates[-2]["generated_tokens"] < 700  # the last update started under budget
    assert summary["overshoot"]["generated_tokens"] == spent - 700
    assert 0 <= summary["overshoot"]["generated_tokens"] < updates[-1]["update_charged_tokens"]
    assert summary["last_update_cost"]["generated_tokens"] == updates[-1]["update_charged_tokens"]
    saved = json.loads((out / "summary.json").read_text())
    assert saved["updates"] == summary["updates"] and saved["stop_reason"] == "budget"
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["run"]["arm"] == "grpo" and len(cfg["plan_sha256"]) == 64 and "torch" in cfg["versions"]
    assert json.loads((out / "checkpoint.json").read_text())["update"] == summary["updates"]
    assert sorted(p.name for p in out.glob("checkpoint-*")) == [f"checkpoint-{summary['updates']:06d}"]


def test_eval_lines_follow_the_token_schedule(baseline):
    out, summary, lines = baseline
    evals = [x for x in lines if x.get("eval")]
    updates = [x for x in lines if not x.get("eval")]
    assert evals[0]["update"] == 0 and evals[0]["generated_tokens"] == 0
    assert evals[-1]["update"] == summary["updates"]
    # one eval at the first update whose charged tokens reach each multiple of every_tokens
    expected = {0}
    for m in range(1, 10):
        first = next((u["update"] for u in updates if u["generated_tokens"] >= 250 * m), None)
        if first is not None:
            expected.add(first)
    expected.add(summary["updates"])
    assert [e["update"] for e in evals] == sorted(expected)
    for e in evals:
        assert 0 <= e["greedy_accuracy"] <= 1 and 0 <= e["sampled_accuracy"] <= 1 and e["prompts"] == 6
        assert e["eval_tokens"] > 0
    # an eval line sits right after the update it measures
    for i, line in enumerate(lines):
        if line.get("eval") and line["update"] > 0:
            assert lines[i - 1]["update"] == line["update"] and not lines[i - 1].get("eval")


def test_ledger_totals_add_up(baseline):
    out, summary, lines = baseline
    evals = [x for x in lines if x.get("eval")]
    updates = [x for x in lines if not x.get("eval")]
    led = summary["ledger"]
    gen = led["generated_tokens"]
    assert gen["continuation"] == gen["selection"] == 0
    assert gen["rollout"] == sum(u["update_charged_tokens"] for u in updates) == led["charged_generated_tokens"]
    assert gen["eval"] == sum(e["eval_tokens"] for e in evals) > 0  # logged, never charged
    assert led["trained_tokens"] == gen["rollout"]
    assert summary["spent"]["flops"] == pytest.approx(led["flops"]["generation"] + led["flops"]["training"])
    assert led["flops"]["training"] == pytest.approx(3 * led["flops"]["generation"], rel=0.2)
    secs = led["device_seconds"]
    assert led["training_device_seconds"] == pytest.approx(secs["generation"] + secs["training"])
    assert secs["reward"] > 0  # the outcome verifier's own time, charged like generation and the update
    assert summary["spent"]["device_seconds"] == pytest.approx(secs["generation"] + secs["training"] + secs["reward"])
    assert secs["eval"] > 0 and secs["metrics"] > 0  # measured, but outside the training seconds
    for u in updates:
        for key in ("reward_mean", "advantage_mean", "advantage_std", "advantage_abs_mean", "loss", "grad_norm",
                    "kl_init", "entropy", "response_length_mean", "truncation_rate", "format_rate",
                    "zero_variance_groups", "lr"):
            assert u[key] is not None and math.isfinite(u[key]), key
        assert 0 <= u["reward_mean"] <= 1 and u["kl_init"] >= 0 and 0 < u["entropy"] <= math.log(100)
    # the policy that sampled batch 1 is the initial one: k3 = 0 in exact arithmetic, but l_theta (the loss's
    # grad-enabled sdpa forward) and l_init (a no-grad forward of the frozen copy) round separately in float32
    assert 0.0 <= updates[0]["kl_init"] <= 1e-10 and updates[0]["kl_clamped_tokens"] == 0
    assert updates[-1]["kl_init"] > 0
    assert any(u["advantage_abs_mean"] > 0 for u in updates)


def test_killed_run_resumes_exactly(baseline, task, tmp_path):
    out, summary, lines = baseline

    def kill(update):
        if update == 5:
            raise Killed

    with pytest.raises(Killed):
        _run(tmp_path, task, after_update=kill)
    partial = _lines(tmp_path)
    assert partial[-1]["update"] == 5 and json.loads((tmp_path / "checkpoint.json").read_text())["update"] == 4
    resumed = _run(tmp_path, task)
    got = _lines(tmp_path)
    assert [_deterministic(x) for x in got] == [_deterministic(x) for x in lines]
    assert resumed["updates"] == summary["updates"]
    keys = [(x.get("eval", False), x["update"]) for x in got]
    assert len(keys) == len(set(keys))  # no line duplicated by the resume
    a, b = load_policy("tiny-qwen2"), load_policy("tiny-qwen2")
    ckpt_mod.load_checkpoint(out / f"checkpoint-{summary['updates']:06d}", a.model)
    ckpt_mod.load_checkpoint(tmp_path / f"checkpoint-{summary['updates']:06d}", b.model)
    init = load_policy("tiny-qwen2").model.state_dict()
    for (name, p), q in zip(a.model.state_dict().items(), b.model.state_dict().values()):
        assert torch.equal(p, q), name
    assert any(not torch.equal(p, init[n]) for n, p in a.model.state_dict().items())


def test_finished_run_is_not_redone_and_another_config_is_refused(baseline, task):
    out, summary, lines = baseline
    again = _run(out, task)
    assert again["updates"] == summary["updates"] and _lines(out) == lines
    with pytest.raises(RunConfigMismatchError, match="train"):
        _run(out, task, text=PLAN.replace("lr = 1e-3", "lr = 2e-3"))


def test_mc_arm_reports_its_continuation_tokens(task, tmp_path):
    text = PLAN.replace("generated_tokens = 700", "updates = 2").replace("every_tokens = 250", "every_tokens = 0")
    summary = _run(tmp_path, task, text=text, arm="mc_value")
    gen = summary["ledger"]["generated_tokens"]
    assert summary["budget_spent"] == "updates" and summary["updates"] == 2
    assert gen["continuation"] > 0
    assert summary["continuation_share"] == pytest.approx(gen["continuation"] / (gen["rollout"] + gen["continuation"]))
    updates = [x for x in _lines(tmp_path) if not x.get("eval")]
    assert sum(u["update_generated_tokens"]["continuation"] for u in updates) == gen["continuation"]
    assert summary["ledger"]["trained_tokens"] == gen["rollout"]  # continuations are generated, not trained
    assert [e["update"] for e in _lines(tmp_path) if e.get("eval")] == [0, 2]


def _args(plan, out, arm="grpo"):
    parser = argparse.ArgumentParser()
    add_train_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["train", "--plan", str(plan), "--arm", arm, "--seed", "0", "--out", str(out),
                              "--no-progress"])


def test_nan_loss_stops_with_exit_2_and_keeps_the_data(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(REWARDS, "explode_at_3", exploding_reward(3))
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN.replace('reward = "outcome"', 'reward = "explode_at_3"'))
    out = tmp_path / "run"
    assert train_main(_args(plan, out)) == 2
    err = capsys.readouterr().err
    assert "update 3" in err and "non-finite" in err and str(out) in err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stop_reason"] == "non_finite_loss" and summary["failed_update"] == 3 and not summary["completed"]
    assert [x["update"] for x in _lines(out) if not x.get("eval")] == [1, 2]
    assert json.loads((out / "checkpoint.json").read_text())["update"] == 2
    with pytest.raises(NonFiniteRunError) as e:  # the library raises a named error with the update
        monkeypatch.setitem(REWARDS, "explode_at_3", exploding_reward(3))
        run_training(parse_plan(plan.read_text()).arm("grpo"), tmp_path / "run2", policy=load_policy("tiny-qwen2"),
                     task=ScoredTask("digit3", train_size=16))
    assert e.value.update == 3


def test_unwritable_output_folder_fails_before_any_compute(tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    assert train_main(_args(plan, blocker / "run")) == 2
    err = capsys.readouterr().err
    assert str(blocker) in err and "is a file" in err and "choose another --out" in err
    assert train_main(_args(plan, tmp_path / "run", arm="nope")) == 2
    assert "grpo, mc_value" in capsys.readouterr().err
    # a model that cannot be loaded: refused after the folder check, and the empty folder is removed
    plan.write_text(PLAN.replace('name = "tiny-qwen2"', 'name = "no-such-model"'))
    assert train_main(_args(plan, tmp_path / "run_bad_model")) == 2
    assert "no-such-model" in capsys.readouterr().err and not (tmp_path / "run_bad_model").exists()


def test_disk_full_while_checkpointing_leaves_no_partial_checkpoint(tmp_path, task, monkeypatch):
    real = ckpt_mod._save_model
    calls = []

    def full_disk(model, path):
        calls.append(path)
        if len(calls) == 2:  # the second checkpoint: write half a file, then run out of space
            Path(path).write_bytes(b"\0" * 100)
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        real(model, path)

    monkeypatch.setattr(ckpt_mod, "_save_model", full_disk)
    with pytest.raises(OutputDirError) as e:
        _run(tmp_path, task)
    msg = str(e.value)
    assert "free space" in msg and str(tmp_path) in msg and "No space left" in msg
    assert not list(tmp_path.glob(".checkpoint-*")) and [p.name for p in tmp_path.glob("checkpoint-*")] == [
        "checkpoint-000002"]
    assert json.loads((tmp_path / "checkpoint.json").read_text())["update"] == 2
    assert json.loads((tmp_path / "summary.json").read_text())["stop_reason"] == "write_error"
    assert [x["update"] for x in _lines(tmp_path) if not x.get("eval")] == [1, 2, 3, 4]


def test_pool_order_is_a_function_of_update_and_seed():
    first = [i for u in range(8) for i in pool_indices(u, 2, 16, seed=0)]
    assert sorted(first) == list(range(16))  # one epoch covers the pool once
    assert pool_indices(3, 2, 16, seed=0) == first[6:8]
    assert first != [i for u in range(8) for i in pool_indices(u, 2, 16, seed=1)]
    assert sorted(i for u in range(8, 16) for i in pool_indices(u, 2, 16, seed=0)) == list(range(16))


def test_policy_stats_match_the_training_logprobs(task):
    from gradprobe.config import SamplingConfig
    from gradprobe.logprobs import token_logprobs
    from gradprobe.rollout import HFSampler, collect_rollouts

    policy = load_policy("tiny-qwen2")
    batch = collect_rollouts(policy, task, task.problems("train", 2), group_size=3,
                             sampler=HFSampler(policy, seed=0, progress=False),
                             sampling=SamplingConfig(max_new_tokens=12, temperature=0.7))
    logp, ent = logp_entropy(policy.model, batch, slice(0, batch.num_rows))
    with torch.no_grad():
        ref = token_logprobs(policy.model, batch.input_ids, batch.attention_mask, batch.prompt_length, temperature=0.7)
    m = batch.completion_mask
    assert torch.allclose(logp[m], ref[m], atol=1e-5)
    assert bool((ent[m] > 0).all()) and bool((ent[m] <= math.log(policy.model.config.vocab_size) + 1e-5).all())
    other = load_policy("tiny-qwen2", seed=1).model
    kl_same, _ = policy_stats(policy.model, policy.model, batch, 4)
    kl_other, entropy = policy_stats(policy.model, other, batch, 2)
    assert kl_same == 0.0 and kl_other > 0  # exact: the same no-grad forward twice, d = 0 bit for bit
    assert entropy == pytest.approx(float(ent[m].double().mean()), rel=1e-5)


def test_updates_use_sdpa_the_sampling_limit_and_one_pass_stats(task, tmp_path, monkeypatch):
    """run_training's updates: sdpa attention, dr_grpo's L_max = sampling.max_new_tokens, and the
    logged kl_init/entropy (from the loss forward) equal the two-pass policy_stats before the step."""
    import gradprobe.grpo.step as step_mod

    real, seen = step_mod.grpo_step, []

    def spy(model, optimizer, batch, adv, config, **kw):
        init = kw["init_model"]
        assert init is not model and model.config._attn_implementation == "gradprobe_eager"
        reference = policy_stats(model, init, batch, 3)  # two extra no-grad forwards, the old path
        out = real(model, optimizer, batch, adv, config, **kw)
        seen.append((config, reference, (out["kl_init"], out["entropy"])))
        assert model.config._attn_implementation == "gradprobe_eager"  # restored for the probe
        return out

    monkeypatch.setattr(step_mod, "grpo_step", spy)
    text = PLAN.replace("generated_tokens = 700", "updates = 3").replace("prompts = 6", "prompts = 2").replace(
        "lr = 1e-3", 'lr = 1e-3\nloss_type = "dr_grpo"')
    _run(tmp_path / "run", task, text=text)
    updates = [x for x in _lines(tmp_path / "run") if not x.get("eval")]
    assert len(seen) == len(updates) == 3
    for (config, (kl_ref, ent_ref), (kl, ent)), line in zip(seen, updates):
        assert config.attention == "sdpa" and config.max_completion_length == 16 and config.loss_type == "dr_grpo"
        assert kl == pytest.approx(kl_ref, rel=1e-4, abs=1e-9) and ent == pytest.approx(ent_ref, rel=1e-5)
        assert (line["kl_init"], line["entropy"]) == (kl, ent)
    assert 0.0 <= seen[0][2][0] <= 1e-10  # pi_theta == pi_init, up to float32 rounding of two separate forwards
    assert seen[-1][1][0] > 1e-6  # the policy moved away from pi_init


def test_device_seconds_budget_overshoots_by_less_than_one_update(task, tmp_path):
    text = (PLAN.replace("generated_tokens = 700", "device_seconds = 0.4")
            .replace("every_tokens = 250", "every_tokens = 0").replace("[eval]", "[eval]\nsampled = false"))
    summary = _run(tmp_path, task, text=text)
    updates = [x for x in _lines(tmp_path) if not x.get("eval")]
    assert summary["budget_spent"] == "device_seconds" and summary["updates"] == len(updates) >= 1
    spent = summary["spent"]["device_seconds"]
    assert spent >= 0.4 and spent - updates[-1]["update_device_seconds"] < 0.4
    assert summary["overshoot"]["device_seconds"] == pytest.approx(spent - 0.4)
    assert summary["overshoot"]["device_seconds"] < updates[-1]["update_device_seconds"]
    # eval time is measured but never spent from the budget
    assert summary["ledger"]["device_seconds"]["eval"] > 0
    secs = summary["ledger"]["device_seconds"]
    assert spent == pytest.approx(secs["generation"] + secs["training"] + secs["reward"])  # the verifier counts too


def test_the_rewards_own_seconds_are_charged_once_to_the_budget(task, tmp_path, monkeypatch):
    """A reward's wall time counts in the seconds budget once: what it charged itself (as a PRM or
    the process verifier does) plus the rest of its call, never both for the same second."""
    import time as _time

    from gradprobe.rewards.outcome import outcome

    def slow(batch, ctx):
        _time.sleep(0.6)
        ctx.ledger.add_seconds("reward", 0.5)  # the part of its 0.6 s it measured itself
        return outcome(batch, ctx)

    monkeypatch.setitem(REWARDS, "slow_verifier", slow)
    summary = _run(tmp_path, task, text=PLAN.replace('reward = "outcome"', 'reward = "slow_verifier"', 1))
    updates = [x for x in _lines(tmp_path) if not x.get("eval")]
    secs = summary["ledger"]["device_seconds"]
    n = len(updates)
    assert n >= 3 and 0.6 * n <= secs["reward"] < 0.9 * n  # double counting would give >= 1.1 per call
    assert all(u["update_device_seconds"] >= 0.6 for u in updates)
    assert summary["spent"]["device_seconds"] == pytest.approx(secs["generation"] + secs["training"] + secs["reward"])


def test_cli_train_runs_a_plan_arm(tmp_path, capsys):
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN.replace("generated_tokens = 700", "updates = 1").replace("prompts = 6", "prompts = 2"))
    out = tmp_path / "run"
    assert train_main(_args(plan, out)) == 0
    printed = capsys.readouterr().out
    assert "1 updates" in printed and "summary.json" in printed
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["run"]["task"]["name"] == "chain_sum" and cfg["run"]["seed"] == 0
    assert [x["update"] for x in _lines(out)] == [0, 1, 1]  # eval, update, final eval


def test_ctrl_c_says_what_running_the_command_again_really_does(tmp_path):
    """SIGINT to real ``gradprobe train`` processes: before the first checkpoint the rerun starts over from update
    0 (it used to claim a resume "from its last checkpoint"); after one it resumes from that checkpoint."""
    import os
    import signal
    import subprocess
    import time

    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    endless = PLAN.replace("generated_tokens = 700", "generated_tokens = 1000000").replace(
        "every_tokens = 250", "every_tokens = 100000")
    procs = {}
    for name, every in (("no_ckpt", 100000), ("ckpt", 1)):
        plan = tmp_path / f"{name}.toml"
        plan.write_text(endless.replace("checkpoint_every = 2", f"checkpoint_every = {every}"))
        out = tmp_path / name
        err = open(tmp_path / f"{name}.err", "w")
        procs[name] = (subprocess.Popen([sys.executable, "-m", "gradprobe.cli", "train", "--plan", str(plan), "--arm",
                                         "grpo", "--out", str(out)], cwd=repo, env=env, stdout=subprocess.DEVNULL,
                                        stderr=err), out, err)

    def updates(out: Path) -> int:
        try:
            return sum(1 for x in (out / "metrics.jsonl").read_text().splitlines() if x and '"eval": true' not in x)
        except OSError:
            return 0

    try:
        for name, ready in (("no_ckpt", lambda out: updates(out) >= 1),
                            ("ckpt", lambda out: (out / "checkpoint.json").exists())):
            proc, out, _ = procs[name]
            deadline = time.monotonic() + 900  # a backstop against a hang, not a speed requirement
            while not ready(out):
                assert proc.poll() is None, (tmp_path / f"{name}.err").read_text()
                assert time.monotonic() < deadline, f"{name}: not ready after 900 s"
                time.sleep(0.1)
            proc.send_signal(signal.SIGINT)
        codes = {name: proc.wait(timeout=600) for name, (proc, _, _) in procs.items()}
    finally:
        for proc, _, err in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            err.close()
    text = {name: (tmp_path / f"{name}.err").read_text() for name in procs}
    assert codes == {"no_ckpt": 130, "ckpt": 130}, text
    for t in text.values():
        assert "Traceback" not in t and "resumes from its last checkpoint" not in t
    out = procs["no_ckpt"][1]
    assert not (out / "checkpoint.json").exists()
    n = updates(out)
    assert (f"gradprobe train: interrupted; it stopped after {n} update(s), before the first checkpoint "
            f"(checkpoint_every = 100,000 updates): there is nothing to resume from, so running the same command "
            f"again starts this run over from update 0 (the {n} update(s) in {out} are discarded)") in text["no_ckpt"]
    out = procs["ckpt"][1]
    pointer = json.loads((out / "checkpoint.json").read_text())
    assert (f"gradprobe train: interrupted; running the same command again resumes from {pointer['checkpoint']} "
            f"(update {pointer['update']}) in {out}") in text["ckpt"]


def test_a_budget_smaller_than_one_update_stops_with_a_clear_error_and_keeps_the_data(tmp_path, task):
    from gradprobe.training.run import BudgetTooSmallError

    text = PLAN.replace("generated_tokens = 700", "generated_tokens = 9")  # passes the static B*G = 8 check
    with pytest.raises(BudgetTooSmallError, match="smaller than one update"):
        _run(tmp_path / "run", task, text=text)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["stop_reason"] == "budget_smaller_than_one_update" and summary["updates"] == 1
    assert not summary["completed"] and "budget.generated_tokens = 9" in summary["error"]
    assert any('"update": 1' in line for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines())


@pytest.mark.parametrize("every", [2, 0])
def test_stats_every_thins_the_policy_statistics_without_changing_training(baseline, task, tmp_path, every):
    """[train] stats_every = K: kl_init and entropy on every K-th update only (0: never, no copy of
    the initial model); losses, rewards, evals and weights are those of the run with statistics on
    every update."""
    _, _, lines = baseline
    text = PLAN.replace("checkpoint_every = 2", f"checkpoint_every = 2\nstats_every = {every}")
    _run(tmp_path / "r", task, text)
    thinned = _lines(tmp_path / "r")
    assert len(thinned) == len(lines)
    for a, b in zip(lines, thinned):
        if a.get("eval"):  # an eval line carries the KL of the last update that measured it
            assert {**_deterministic(a), "kl_init": None} == {**_deterministic(b), "kl_init": None}
            continue
        assert b["loss"] == a["loss"] and b["reward_mean"] == a["reward_mean"] and b["grad_norm"] == a["grad_norm"]
        if every and b["update"] % every == 0:
            assert b["kl_init"] == pytest.approx(a["kl_init"], abs=1e-12) and b["entropy"] == a["entropy"]
        else:
            assert b["kl_init"] is None and b["entropy"] is None
    assert any(x.get("kl_init") is not None for x in thinned if not x.get("eval")) == bool(every)
    with pytest.raises(Exception, match="stats_every"):
        parse_plan(PLAN.replace("checkpoint_every = 2", "checkpoint_every = 2\nstats_every = -1"))


def test_removed_if_left_empty_only_removes_an_empty_folder_the_block_created(tmp_path):
    from gradprobe.training.checkpoint import prepare_output_dir, removed_if_left_empty

    def fail_in(out, write=False):
        with pytest.raises(RuntimeError):
            with removed_if_left_empty(out):
                prepare_output_dir(out)
                if write:
                    (out / "partial.json").write_text("{}")
                raise RuntimeError("refused")

    fail_in(tmp_path / "new")
    assert not (tmp_path / "new").exists()  # created here, left empty: removed
    fail_in(tmp_path / "written", write=True)
    assert (tmp_path / "written" / "partial.json").exists()  # data is never lost
    (tmp_path / "mine").mkdir()
    fail_in(tmp_path / "mine")
    assert (tmp_path / "mine").is_dir()  # the user's folder stays, even empty
    with removed_if_left_empty(tmp_path / "ok"):
        prepare_output_dir(tmp_path / "ok")
    assert (tmp_path / "ok").is_dir()  # success: kept
    # the parents created for it go too while empty (`--out deep/a/b` left deep/a behind) ...
    fail_in(tmp_path / "deep" / "a" / "b")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine", "ok", "written"]
    # ... up to the first that holds something, or that existed before
    fail_in(tmp_path / "mine" / "x" / "y")
    assert (tmp_path / "mine").is_dir() and not (tmp_path / "mine" / "x").exists()
    (tmp_path / "p").mkdir()

    def fail_with_a_sibling(out):
        with pytest.raises(RuntimeError):
            with removed_if_left_empty(out):
                prepare_output_dir(out)
                (tmp_path / "p" / "q" / "kept.txt").write_text("x")  # written beside it by the block
                raise RuntimeError("refused")

    fail_with_a_sibling(tmp_path / "p" / "q" / "r")
    assert not (tmp_path / "p" / "q" / "r").exists() and (tmp_path / "p" / "q" / "kept.txt").exists()


def test_eval_schedule_listed_updates_budget_fractions_and_per_item_results(task, tmp_path):
    """[eval] at_updates and at_fractions: evals at update 0, each listed update, the first update
    at or after each fraction of the token budget, and the end; eval_items.jsonl holds one line
    per eval whose greedy string reproduces the eval's accuracy; sampled only at the ends."""
    text = PLAN.replace("every_tokens = 250", 'at_updates = [1, 3]\nat_fractions = [0.5]\nsampled_at = "ends"')
    summary = _run(tmp_path, task, text)
    lines = _lines(tmp_path)
    evals = [x for x in lines if x.get("eval")]
    updates = [x for x in lines if not x.get("eval")]
    half = next(u["update"] for u in updates if u["generated_tokens"] >= 350)
    expected = sorted({0, 1, 3, half, summary["updates"]})
    assert [e["update"] for e in evals] == expected
    items = [json.loads(x) for x in (tmp_path / "eval_items.jsonl").read_text().splitlines()]
    assert [i["update"] for i in items] == expected
    for e, i in zip(evals, items):
        assert len(i["greedy"]) == e["prompts"] == 6 and set(i["greedy"]) <= {"0", "1"}
        assert i["greedy"].count("1") / 6 == e["greedy_accuracy"]
        assert i["generated_tokens"] == e["generated_tokens"] and i["flops"] == e["flops"]
        ends = e["update"] in (0, summary["updates"])
        assert (e["sampled_accuracy"] is not None) == ends and len(i["sampled"]) == int(ends)
        if ends:
            assert i["sampled"][0].count("1") / 6 == e["sampled_accuracy"]
        assert e["response_length"] > 0 and 0 <= e["format_rate"] <= 1


def test_resume_keeps_eval_items_exact(task, tmp_path):
    """A run killed after a checkpoint resumes with eval_items.jsonl equal to an uninterrupted run's."""
    text = PLAN.replace("every_tokens = 250", "at_updates = [1, 2, 3]")
    _run(tmp_path / "full", task, text)

    def kill(update):
        if update == 3:
            raise Killed

    with pytest.raises(Killed):
        _run(tmp_path / "cut", task, text, after_update=kill)
    _run(tmp_path / "cut", task, text)
    full = (tmp_path / "full" / "eval_items.jsonl").read_text().splitlines()
    cut = (tmp_path / "cut" / "eval_items.jsonl").read_text().splitlines()
    strip = lambda ls: [{k: v for k, v in json.loads(x).items() if k != "device_seconds"} for x in ls]  # noqa: E731
    assert strip(cut) == strip(full) and len(full) >= 4


def test_iterations_take_mu_optimizer_steps_per_batch_with_pi_old_ratios(task, tmp_path, monkeypatch):
    """``iterations = 2`` (TRL num_iterations): two optimizer steps per rollout batch, the second with
    pi_old's log-probabilities (the first step's ratio is 1), mu steps' FLOPs plus pi_old's forward charged,
    and the same number of updates (batches) and generated tokens as mu = 1 on the same budget."""
    import gradprobe.grpo.step as step_mod
    from gradprobe.training import run as run_mod

    seen = []
    real = step_mod.grpo_step

    def spy(model, optimizer, batch, adv, config, **kw):
        if kw.get("old_logp") is not None:  # pi_old matches the current policy before the first step
            fresh = step_mod.old_policy_logprobs(model, batch, config)
            seen.append(float(((fresh - kw["old_logp"]).abs() * batch.completion_mask).max()))
        return real(model, optimizer, batch, adv, config, **kw)

    monkeypatch.setattr(run_mod, "grpo_step", spy, raising=False)
    monkeypatch.setattr(step_mod, "grpo_step", spy)
    text = PLAN.replace("generated_tokens = 700", "updates = 2").replace("lr = 1e-3", "lr = 1e-3\niterations = 2")
    one = _run(tmp_path / "mu1", task, text=text.replace("iterations = 2", "iterations = 1"))
    two = _run(tmp_path / "mu2", task, text=text)
    assert one["updates"] == two["updates"] == 2
    # per batch: the first step sees pi_old == pi_theta exactly; the second sees a moved policy
    assert len(seen) == 4 and seen[0] == 0.0 and seen[2] == 0.0 and seen[1] > 0 and seen[3] > 0
    updates = [x for x in _lines(tmp_path / "mu2") if not x.get("eval")]
    assert all(len(u["iteration_losses"]) == 2 and len(u["iteration_grad_norms"]) == 2 for u in updates)
    assert updates[0]["iteration_losses"][0] == pytest.approx(updates[0]["loss"])
    lines1 = [x for x in _lines(tmp_path / "mu1") if not x.get("eval")]
    assert "iteration_losses" not in lines1[0]
    # same first batch (same seed), same first step; FLOPs: (3 x mu + 1) forwards of the batch vs 3
    assert updates[0]["update_generated_tokens"] == lines1[0]["update_generated_tokens"]
    assert updates[0]["loss"] == pytest.approx(lines1[0]["loss"], rel=1e-5)
    tr1 = lines1[0]["ledger"]["flops"]["training"]
    tr2 = updates[0]["ledger"]["flops"]["training"]
    assert tr2 == pytest.approx(tr1 * 7 / 3, rel=1e-9)
    assert two["ledger"]["trained_tokens"] == 2 * one["ledger"]["trained_tokens"]
    with pytest.raises(Exception, match="iterations must be > 0"):
        parse_plan(text.replace("iterations = 2", "iterations = 0"))
