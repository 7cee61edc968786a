"""The default main job (`gradprobe probe` with no options): the shipped tiny tier on its frontier
task, and the CPU thread policy that keeps a small model's job fast on a shared machine."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import pytest
import torch

from gradprobe import cli
from gradprobe.cli.probe import _config_from_args
from gradprobe.config import MCConfig, SamplingConfig
from gradprobe.probe.run import DEFAULT_TASK, SMALL_MODEL_PARAMETERS, ProbeConfig, probe_threads, run_probe
from gradprobe.tasks import load_task
from gradprobe.tiers import TINY_FRONTIER_TASK


def _probe_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli._add_probe(parser.add_subparsers(dest="command"))
    return parser.parse_args(["probe", *argv])


def test_defaults_are_the_tiny_tier_on_its_frontier_task():
    config = ProbeConfig()
    assert config.model.name == "tiny" and config.rewards == ("outcome", "mc_value", "hybrid_0.5")
    task = load_task(config.task.spec)
    assert config.task.spec == DEFAULT_TASK and task.config == {**task.config, **TINY_FRONTIER_TASK}
    problems = task.problems("train", 50)
    assert {p.metadata["num_terms"] for p in problems} == {3, 4} and {p.metadata["num_digits"] for p in problems} == {1}
    assert config.model.threads is None and config.mc == MCConfig(continuations=2)


def test_command_line_defaults_equal_the_config_defaults():
    """`gradprobe probe` with no options runs ProbeConfig() (the two lists of defaults cannot drift apart)."""
    args, config = _probe_args([]), ProbeConfig()
    flat = config.to_dict()  # probe.json["config"]: one key per flat setting
    assert args.model == config.model.name == flat["model"] and args.task == config.task.spec
    assert tuple(args.rewards.split(",")) == config.rewards
    for name in ("prompts", "group", "heldout_prompts", "heldout_group", "lr", "budget_tokens", "budget_seconds",
                 "precondition", "loss_type", "seed", "threads", "device", "dtype", "micro_batch_size",
                 "update_prompts", "update_group", "reference"):
        assert getattr(args, name) == flat[name], name
    assert (args.bootstrap, args.no_progress, args.cosine) == (flat["n_bootstrap"], not flat["progress"], flat["cosine"])
    assert _config_from_args(args) == config  # the command line's config of no options is the default one
    assert (args.continuations, args.max_steps) == (config.mc.continuations, config.mc.max_steps)
    assert (args.temperature, args.top_p, args.max_new_tokens) == (config.sampling.temperature, config.sampling.top_p,
                                                                    config.sampling.max_new_tokens)
    assert _probe_args(["--threads", "3"]).threads == 3
    assert args.generation_batch_size == config.sampling.batch_size == 64
    assert _config_from_args(_probe_args(["--generation-batch-size", "128"])).sampling.batch_size == 128
    with pytest.raises(ValueError, match=r"sampling.batch_size must be >= 1"):
        _config_from_args(_probe_args(["--generation-batch-size", "0"]))


def test_small_models_probe_on_one_thread_and_the_callers_setting_is_restored(tiny_policy, monkeypatch):
    assert sum(p.numel() for p in tiny_policy.model.parameters()) < SMALL_MODEL_PARAMETERS
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)  # OpenMP's default: threads spin a while
    assert probe_threads(ProbeConfig(), tiny_policy.model) == 1
    assert probe_threads(ProbeConfig.from_dict(dict(threads=2)), tiny_policy.model) == 2
    monkeypatch.setenv("OMP_WAIT_POLICY", "passive")  # as `gradprobe` sets it before torch loads
    assert probe_threads(ProbeConfig(), tiny_policy.model) == torch.get_num_threads()
    monkeypatch.delenv("OMP_WAIT_POLICY")
    monkeypatch.setattr("gradprobe.probe.run.SMALL_MODEL_PARAMETERS", 10)  # as if it were a large model
    assert probe_threads(ProbeConfig(), tiny_policy.model) == torch.get_num_threads()
    with pytest.raises(ValueError, match="--threads"):
        ProbeConfig.from_dict(dict(threads=0))


def test_run_probe_sets_the_threads_during_the_probe_only(tiny_policy, monkeypatch):
    from gradprobe.rewards import sequence_reward

    seen = []

    def record(prompts, completions, **kw):  # a reward is called inside the probe
        seen.append(torch.get_num_threads())
        return [float(len(c) % 2) for c in completions]

    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        config = ProbeConfig.from_dict(dict(
            model="tiny-qwen2", task="chain_sum", rewards=(), prompts=2, group=2, heldout_prompts=1,
            heldout_group=2, n_bootstrap=10, progress=False, sampling=SamplingConfig(max_new_tokens=4)))
        run_probe(config, policy=tiny_policy, extra_rewards={"parity": sequence_reward(record)})
        assert seen == [1] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_console_command_makes_openmp_threads_wait_passively(monkeypatch):
    """OMP_WAIT_POLICY is read when torch loads OpenMP: the console command sets PASSIVE before anything
    imports torch (unless the user set a policy), and importing gradprobe.cli imports no torch."""
    code = ("import os, sys\nimport gradprobe.cli as c\nassert 'torch' not in sys.modules\n"
            "sys.argv = ['gradprobe', 'probe', '--rewards', 'bogus', '--out', os.devnull + '/x']\n"
            "rc = c.main()\nprint(rc, os.environ.get('OMP_WAIT_POLICY'))")
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.stdout.split() == ["2", "PASSIVE"], out.stderr[-2000:]
    # a policy the user chose is kept; with torch already loaded nothing is set (it would have no effect)
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    monkeypatch.delitem(sys.modules, "torch")
    cli._passive_openmp()
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"
    monkeypatch.delenv("OMP_WAIT_POLICY")
    monkeypatch.setitem(sys.modules, "torch", torch)
    cli._passive_openmp()
    assert "OMP_WAIT_POLICY" not in os.environ


@pytest.mark.slow
def test_the_default_job_has_something_to_say(tmp_path, capsys):
    """`gradprobe probe --out DIR`: mixed groups, a non-zero reference, every reward probed, no warning
    about flat groups or a zero reference (the issue: the old default printed a table of zeros)."""
    assert cli.main(["probe", "--out", str(tmp_path / "probe"), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    result = json.loads((tmp_path / "probe" / "probe.json").read_text())
    assert result["config"]["model"] == "tiny" and result["config"]["task"] == DEFAULT_TASK
    assert [r["name"] for r in result["rewards"]] == ["outcome", "mc_value", "hybrid_0.5"]
    outcome = result["rewards"][0]
    assert outcome["reward_stats"]["zero_variance_groups"] < result["batch"]["prompts"] // 2  # most groups mixed
    assert 0.2 < result["batch"]["mean_reward"] < 0.9 and result["batch"]["truncation_rate"] == 0.0
    assert result["reference"]["norm"] > 0 and 0 < result["reference"]["heldout_accuracy"] < 1
    groups = result["reference"]["heldout_group_accuracy"]  # one accuracy per held-out prompt, their mean the whole's
    assert len(groups) == result["reference"]["prompts"]
    assert sum(groups) / len(groups) == pytest.approx(result["reference"]["heldout_accuracy"], abs=1e-12)
    assert "CHECK THE CURVE" not in printed  # the shipped curve starts where the default job's policy is
    assert all(r["inner_product"] != 0 for r in result["rewards"])
    assert result["warnings"] == [] and "every group" not in printed and "reference update is zero" not in printed
    print(f"default job: {result['costs']['wall_seconds']:.1f} s inside the probe "
          f"({ {k: round(v, 1) for k, v in result['costs'].items() if isinstance(v, float)} })", file=sys.stderr)
