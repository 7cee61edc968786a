"""An arm whose runs never trained (every update of their metrics.jsonl had every advantage 0: every group flat,
every completion truncated, or the rewards overflowed) is flagged in analysis.json (``arms[ARM]["never_trained"]``:
the seeds, the cause, the updates) and not ranked: the console shows it as "never trained", not a gain. A study
folder without run metrics, or whose metrics lack ``advantage_abs_mean`` (an older gradprobe), flags nothing."""

from __future__ import annotations

import json

from gradprobe.study.analysis import analyze, format_rankings

from study_helpers import make_study

ARMS = ("grpo", "mc_value", "grpo_2xlr")


def _metrics(root, arm: str, seed: int, lines: list[dict]) -> None:
    evals = [{"update": 0, "eval": True, "greedy_accuracy": 0.2}]
    (root / "runs" / arm / f"seed{seed}" / "metrics.jsonl").write_text(
        "".join(json.dumps(x) + "\n" for x in evals + lines))


def _update(u: int, *, adv: float, truncation: float = 0.2, nonfinite: int = 0, big: float = 0.0) -> dict:
    return {"update": u, "advantage_abs_mean": adv, "truncation_rate": truncation, "reward_valid": 8,
            "grad_norm": 0.0 if adv == 0 else 0.7, "zero_variance_groups": 1,
            "reward_stats": {"groups": 2, "zero_variance_groups": 2 - nonfinite, "nonfinite_groups": nonfinite,
                             "overflow_max_abs_reward": big}}


def _study(tmp_path, never: dict):
    """make_study (2 seeds) with a metrics.jsonl in every run folder: ``never[(arm, seed)]`` the kwargs of its
    untrained updates, the others trained (advantage_abs_mean 0 on update 1 only)."""
    root = make_study(tmp_path / "s", seeds=2)
    for arm in ARMS:
        for seed in (0, 1):
            kw = never.get((arm, seed))
            lines = [_update(u, adv=0.0, **kw) for u in range(1, 11)] if kw is not None else [
                _update(1, adv=0.0), *(_update(u, adv=0.5) for u in range(2, 11))]
            _metrics(root, arm, seed, lines)
    return root


def test_an_arm_that_never_trained_is_flagged_and_not_ranked(tmp_path):
    root = _study(tmp_path, {("mc_value", 0): {"truncation": 1.0}, ("mc_value", 1): {"nonfinite": 1, "big": 1e200}})
    (root / "runs" / "mc_value" / "seed0" / "config.json").write_text(  # the run's own config names max_new_tokens
        json.dumps({"run": {"arm": "mc_value", "seed": 0, "sampling": {"max_new_tokens": 1}}}))
    result = analyze(root, write=False, figures=False)
    truncated = ("every completion was truncated at max_new_tokens = 1 (truncation_rate 1.0), so every group's "
                 "rewards were equal")
    overflowed = ("the rewards of every group whose rewards differ overflowed float64 group statistics "
                  "(|reward| up to 1e+200)")
    assert result["arms"]["mc_value"]["never_trained"] == [
        {"seed": 0, "cause": "truncated", "why": truncated, "updates": 10, "max_abs_reward": 0.0,
         "grad_norm_max": 0.0},
        {"seed": 1, "cause": "overflowed", "why": overflowed, "updates": 10, "max_abs_reward": 1e200,
         "grad_norm_max": 0.0}]
    assert result["arms"]["grpo"]["never_trained"] == [] and result["arms"]["grpo_2xlr"]["never_trained"] == []
    # before: mc_value first per update, last at matched tokens and FLOPs (tests/study/test_analysis.py)
    assert result["rankings"] == {"updates": ["grpo", "grpo_2xlr"], "generated_tokens": ["grpo_2xlr", "grpo"],
                                  "flops": ["grpo_2xlr", "grpo"], "device_seconds": []}
    why = f"never trained (seed 0: {truncated} (10 updates); seed 1: {overflowed} (10 updates))"
    assert result["not_ranked"]["updates"] == {"mc_value": why}
    text = format_rankings(result)
    table = text.split("\n\n")[1].splitlines()
    assert table[3].split() == ["-"] + ["mc_value", "never", "trained"] * 4  # one cell per axis
    assert f"mc_value never trained, not ranked (every update of the run had every advantage 0): seed 0: {truncated}" \
           in text
    assert "  generated_tokens: mc_value never trained; grpo_2xlr +2.50" in text and "mc_value -5.00" not in text


def test_one_seed_that_never_trained_keeps_the_arm_out_of_the_ranking(tmp_path):
    root = _study(tmp_path, {("grpo_2xlr", 1): {}, ("grpo", 0): {"truncation": 1.0}})  # grpo: no config.json
    result = analyze(root, write=False, figures=False)
    assert result["arms"]["grpo_2xlr"]["never_trained"] == [
        {"seed": 1, "cause": "flat", "why": "every group's rewards were equal (all groups flat: zero variance)",
         "updates": 10, "max_abs_reward": 0.0, "grad_norm_max": 0.0}]
    assert [r["why"] for r in result["arms"]["grpo"]["never_trained"]] == [
        "every completion was truncated (truncation_rate 1.0), so every group's rewards were equal"]
    assert result["rankings"]["generated_tokens"] == []  # mc_value alone is left
    assert result["not_ranked"]["generated_tokens"]["grpo_2xlr"].startswith("never trained (seed 1: every group's")


def test_a_folder_without_these_fields_flags_nothing(tmp_path):
    root = make_study(tmp_path / "s", seeds=2)  # run folders without metrics.jsonl
    old = {"grpo": {"update": 1, "reward_valid": 8, "grad_norm": 0.0}}  # an older gradprobe's line: no advantage
    for seed in (0, 1):
        _metrics(root, "mc_value", seed, [{**old["grpo"], "update": u} for u in range(1, 4)])
    result = analyze(root, write=False, figures=False)
    assert all(result["arms"][a]["never_trained"] == [] for a in ARMS)
    assert result["rankings"]["generated_tokens"] == ["grpo_2xlr", "grpo", "mc_value"]
    assert "never trained" not in format_rankings(result)
