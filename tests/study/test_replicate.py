"""gradprobe study --replicate: the replicate's plan text and the comparison with the original."""

from __future__ import annotations

import json

from gradprobe.study.runner import compare_replicate, replicate_plan_text
from gradprobe.training.plan import parse_plan, replicate_plan

PLAN = """# a comment
name = "t"
seeds = [0, 1, 2]
[model]
name = "tiny-qwen2"
[task]
name = "chain_sum"
pool = 16
[heldout]
prompts = 6
seed = 3   # data seed
[budget]
generated_tokens = 700
[arms.grpo]
reward = "outcome"
"""


def test_replicate_plan_text_reads_back_as_the_replicate_plan():
    original = parse_plan(PLAN)
    want = replicate_plan(original, seed_offset=3)
    text = replicate_plan_text(PLAN, seeds=want.seeds, heldout_seed=want.heldout.seed, source="S", source_sha256="abc")
    got = parse_plan(text)
    assert got.seeds == (3, 4, 5) and got.heldout.seed == 6 and got.heldout.prompts == 6
    assert got.arms == original.arms and got.budget == original.budget and text.startswith("# Replicate of")


def test_replicate_plan_text_adds_a_held_out_seed_where_the_plan_had_none():
    plain = PLAN.replace("seed = 3   # data seed\n", "")
    got = parse_plan(replicate_plan_text(plain, seeds=(5, 6), heldout_seed=5, source="S", source_sha256="abc"))
    assert got.seeds == (5, 6) and got.heldout.seed == 5 and got.heldout.prompts == 6
    none = PLAN.replace("[heldout]\nprompts = 6\nseed = 3   # data seed\n", "")
    assert parse_plan(replicate_plan_text(none, seeds=(9,), heldout_seed=4, source="S",
                                          source_sha256="abc")).heldout.seed == 4


def test_compare_replicate_says_whether_the_replicate_falls_inside_the_original_interval(tmp_path):
    def study(folder, gain, ci):
        folder.mkdir()
        arms = {"grpo": {"generated_tokens": {"gain_vs_grpo": 0.0, "gain_ci": None}},
                "mc_value": {"generated_tokens": {"gain_vs_grpo": gain, "gain_ci": ci}}}
        (folder / "analysis.json").write_text(json.dumps({"arms": arms}))
        return folder

    a = study(tmp_path / "a", -4.0, [-5.0, -3.0])
    b = study(tmp_path / "b", -3.5, [-4.5, -2.5])
    c = study(tmp_path / "c", -1.0, [-2.0, 0.0])
    assert "mc_value       -4.00 [-5.00, -3.00]" in compare_replicate(a, b)
    assert compare_replicate(a, b).rstrip().endswith("yes") and compare_replicate(a, c).rstrip().endswith("no")
