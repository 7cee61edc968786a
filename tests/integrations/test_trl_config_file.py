"""``gradprobe probe --trl-config FILE``: a TRL GRPOConfig file read as probe options."""

from __future__ import annotations

import argparse
import json

import pytest

from gradprobe import cli
from gradprobe.integrations.trl_config import TrlConfigError, apply_trl_config


def _parse(argv: list[str]) -> argparse.Namespace:
    """``gradprobe probe ARGV`` parsed with the real probe parser (nothing runs)."""
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    cli._add_probe(sub)
    return parser.parse_args(["probe", *argv])


def _yaml(tmp_path, text: str):
    path = tmp_path / "grpo.yaml"
    path.write_text(text)
    return path


FULL_YAML = """\
output_dir: runs/my-grpo
loss_type: dr_grpo
scale_rewards: none
num_generations: 4
max_completion_length: 48
learning_rate: 3.0e-6
beta: 0.04
temperature: 0.7
top_p: 0.95
seed: 7
optim: adamw_torch
per_device_train_batch_size: 8
gradient_accumulation_steps: 2
logging_steps: 5
report_to: wandb
dataset_name: openai/gsm8k
"""


def test_every_mapped_field_of_a_yaml_file(tmp_path):
    args = _parse(["--trl-config", str(_yaml(tmp_path, FULL_YAML))])
    settings = apply_trl_config(args)
    assert args.loss_type == "dr_grpo"
    assert args.rewards == "outcome_dr,mc_value,hybrid_0.5"  # scale_rewards none -> Dr. GRPO's outcome
    assert settings.reference_reward == "outcome_dr"
    assert args.group == 4
    assert args.max_new_tokens == 48
    assert args.lr == pytest.approx(3e-6)
    assert (args.temperature, args.top_p, args.seed) == (0.7, 0.95, 7)
    assert args.precondition == "adam"
    assert args.update_prompts == 8 * 2 // 4  # completions per optimizer step / G
    rec = settings.record()
    assert set(rec["from_file"]) == {"loss_type", "scale_rewards", "num_generations", "max_completion_length",
                                     "learning_rate", "beta", "temperature", "top_p", "seed", "optim",
                                     "per_device_train_batch_size"}
    assert rec["overridden_by_flags"] == {}
    assert {"output_dir", "logging_steps", "report_to", "dataset_name"} <= set(rec["ignored"])
    assert any("beta 0.04" in n and "initial policy" in n for n in rec["notes"])
    json.dumps(rec)  # serialisable as it goes into probe.json


def test_json_file_and_loss_type_mapping(tmp_path):
    for trl_loss, probe_loss in (("grpo", "grpo"), ("dapo", "dapo"), ("bnpo", "dapo"), ("cispo", "dapo")):
        path = tmp_path / f"{trl_loss}.json"
        path.write_text(json.dumps({"loss_type": trl_loss, "scale_rewards": "batch", "optim": "sgd",
                                    "learning_rate": "1e-6"}))  # YAML/JSON text numbers are read as numbers
        args = _parse(["--trl-config", str(path)])
        settings = apply_trl_config(args)
        assert args.loss_type == probe_loss
        assert args.rewards.split(",")[0] == "outcome_batch"
        assert args.precondition == "none"
        # TRL's cispo caps its weight at epsilon_high (default epsilon = 0.2): at ratio 1 an SGD step is 0.2 x dapo's
        assert args.lr == pytest.approx(2e-7 if trl_loss == "cispo" else 1e-6)
        assert args.update_prompts is None  # no batch field in the file: the probe batch's own
        if trl_loss == "cispo":
            assert any("cispo is probed as dapo" in n and "multiplied by 0.2" in n for n in settings.notes)


@pytest.mark.parametrize("extra, lr, says", [({"epsilon_high": 5.0, "optim": "sgd"}, 1e-6, "the gradients are equal"),
                                             ({"optim": "adamw_torch"}, 1e-6, "an Adam step divides out"),
                                             ({"epsilon": 0.3, "optim": "sgd"}, 3e-7, "multiplied by 0.3")])
def test_cispo_weight_cap_at_ratio_one(tmp_path, extra, lr, says):
    """TRL 1.16 ``_compute_loss``: cispo's weight is clamp(r, max=epsilon_high).detach(), epsilon_high
    defaulting to epsilon; at r = 1 the SGD gradient is min(1, epsilon_high) x dapo's."""
    path = tmp_path / "cispo.json"
    path.write_text(json.dumps({"loss_type": "cispo", "learning_rate": 1e-6, **extra}))
    args = _parse(["--trl-config", str(path)])
    settings = apply_trl_config(args)
    assert args.loss_type == "dapo" and args.lr == pytest.approx(lr, rel=1e-12)
    assert sum(says in n for n in settings.notes) == 1


def test_explicit_flags_win_over_the_file(tmp_path):
    path = _yaml(tmp_path, FULL_YAML)
    # --lr given with the parser's own default value still counts as explicit
    args = _parse(["--trl-config", str(path), "--lr", "1e-4", "--group", "6", "--rewards", "outcome,mc_min"])
    settings = apply_trl_config(args)
    assert args.lr == 1e-4 and args.group == 6 and args.rewards == "outcome,mc_min"
    assert args.loss_type == "dr_grpo"  # not given: from the file
    rec = settings.record()
    assert rec["overridden_by_flags"] == {"learning_rate": "--lr", "num_generations": "--group",
                                          "scale_rewards": "--rewards"}
    assert settings.reference_reward == "outcome"  # the explicit --rewards keeps plain outcome
    assert "learning_rate" not in rec["from_file"]


def test_unknown_field_suggests_the_closest(tmp_path):
    args = _parse(["--trl-config", str(_yaml(tmp_path, "learning_rat: 1.0e-6\n"))])
    before = dict(vars(args))
    with pytest.raises(TrlConfigError, match=r"unknown field 'learning_rat'; did you mean 'learning_rate'\?"):
        apply_trl_config(args)
    assert vars(args) == before  # nothing half-applied


@pytest.mark.parametrize("text, field, fix", [
    ("loss_type: sapo\n", "loss_type", "--loss-type"),
    ("num_iterations: 2\n", "num_iterations", "default 1"),
    ("entropy_coef: 0.01\n", "entropy_coef", "default 0.0"),
    ("optim: adafactor\n", "optim", "--precondition"),
    ("top_k: 20\n", "top_k", "default 0"),
    ("learning_rate: -1\n", "learning_rate", "a number > 0), or pass --lr"),  # was "lr must be > 0": no file named
    ("learning_rate: 0\n", "learning_rate", "a number > 0), or pass --lr"),
    # was "seed (--seed) must be in [0, 2**63 - 1] ...": no file named
    ("seed: 9223372036854775808\n", "seed", "[0, 2**63 - 1] (it seeds numpy and torch); write a seed in that range"),
    ("seed: -1\n", "seed", "or pass --seed"),
])
def test_unsupported_values_are_refused_with_field_and_fix(tmp_path, text, field, fix):
    args = _parse(["--trl-config", str(_yaml(tmp_path, text))])
    with pytest.raises(TrlConfigError) as err:
        apply_trl_config(args)
    assert f"field {field!r}" in str(err.value) and fix in str(err.value) and "grpo.yaml" in str(err.value)


def test_unsupported_loss_type_is_accepted_when_the_flag_overrides_it(tmp_path):
    args = _parse(["--trl-config", str(_yaml(tmp_path, "loss_type: sapo\n")), "--loss-type", "grpo"])
    settings = apply_trl_config(args)
    assert args.loss_type == "grpo" and settings.record()["overridden_by_flags"] == {"loss_type": "--loss-type"}


def test_grpoconfig_rejection_names_file_and_field(tmp_path):
    # TRL itself refuses one completion per prompt; the message names the file and the field
    args = _parse(["--trl-config", str(_yaml(tmp_path, "num_generations: 1\n"))])
    with pytest.raises(TrlConfigError, match=r"grpo\.yaml \(field num_generations\): trl\.GRPOConfig rejects"):
        apply_trl_config(args)


def test_batch_that_is_not_whole_groups_is_refused(tmp_path):
    text = "num_generations: 4\nper_device_train_batch_size: 6\ngeneration_batch_size: 12\n"
    args = _parse(["--trl-config", str(_yaml(tmp_path, text))])
    with pytest.raises(TrlConfigError, match="not whole groups of num_generations 4"):
        apply_trl_config(args)


def test_cli_refuses_a_bad_file_before_any_compute(tmp_path, capsys):
    out = tmp_path / "probe-out"
    rc = cli.main(["probe", "--trl-config", str(_yaml(tmp_path, "temprature: 0.7\n")), "--out", str(out)])
    assert rc == 2
    err = capsys.readouterr().err
    assert "did you mean 'temperature'" in err
    assert not out.exists()


def test_cli_records_the_file_in_probe_json(tmp_path):
    path = _yaml(tmp_path, "loss_type: dapo\nnum_generations: 2\nmax_completion_length: 8\nbeta: 0.0\n"
                           "learning_rate: 2.0e-5\n")
    out = tmp_path / "probe-out"
    rc = cli.main(["probe", "--trl-config", str(path), "--model", "tiny-qwen2", "--task", "chain_sum",
                   "--rewards", "outcome", "--prompts", "2", "--heldout-prompts", "2", "--heldout-group", "2",
                   "--bootstrap", "20", "--precondition", "none", "--lr", "1e-4", "--no-progress", "--out", str(out)])
    assert rc == 0
    saved = json.loads((out / "probe.json").read_text())
    assert saved["config"]["loss_type"] == "dapo" and saved["config"]["group"] == 2
    assert saved["config"]["sampling"]["max_new_tokens"] == 8
    assert saved["config"]["lr"] == 1e-4  # the explicit flag won
    rec = saved["trl_config"]
    assert set(rec["from_file"]) == {"loss_type", "num_generations", "max_completion_length", "beta"}
    assert rec["overridden_by_flags"] == {"learning_rate": "--lr"}
