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
    assert "seed = 6   # data seed\n" in text and "# a comment\n" in text  # comments are kept (issue 14)


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


def test_replicate_plan_text_keeps_comments_and_rewrites_multi_line_seeds():
    """Issue 14: the regex version refused a multi-line ``seeds`` and dropped the comment on the
    ``[heldout] seed`` line; tomlkit keeps every comment outside the replaced values."""
    multi = PLAN.replace("seeds = [0, 1, 2]", "seeds = [  # three seeds\n  0,\n  1,\n  2,\n]  # frozen\n# after seeds")
    text = replicate_plan_text(multi, seeds=(3, 4, 5), heldout_seed=6, source="S", source_sha256="abc")
    got = parse_plan(text)
    assert got.seeds == (3, 4, 5) and got.heldout.seed == 6 and got.heldout.prompts == 6
    assert "seeds = [3, 4, 5]  # frozen\n# after seeds\n" in text
    assert "seed = 6   # data seed\n" in text  # the comment on the held-out seed line stays
    assert "# a comment\nname = \"t\"\n" in text
    body = text.split("written by gradprobe study --replicate.\n", 1)[1]
    assert body == multi.replace("seeds = [  # three seeds\n  0,\n  1,\n  2,\n]", "seeds = [3, 4, 5]").replace(
        "seed = 3   # data seed", "seed = 6   # data seed")  # nothing else of the plan changes


def test_replicate_plan_text_adds_seeds_where_the_plan_had_none():
    plain = PLAN.replace("seeds = [0, 1, 2]\n", "")
    got = parse_plan(replicate_plan_text(plain, seeds=(7, 8), heldout_seed=2, source="S", source_sha256="abc"))
    assert got.seeds == (7, 8) and got.heldout.seed == 2 and got.arms == parse_plan(PLAN).arms
