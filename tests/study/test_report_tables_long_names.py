"""The sigmoid and side-effects tables of the study report widen their arm column to the longest arm name, as the
rankings table does (test_ranking_table_long_names): names of 14 characters or more (``process_hybrid_0.5`` in
``data/study_reward_granularity``) ran into the axis or the first side effect; names under 14 keep both tables
byte-identical."""

from __future__ import annotations

import json
from pathlib import Path

from gradprobe.study.report import _side_effects, _sigmoids

DATA = Path(__file__).resolve().parents[2] / "data"
AXES = ["updates", "generated_tokens", "flops", "device_seconds"]


def _result(study: str) -> dict:
    return json.loads((DATA / study / "analysis.json").read_text())


def test_short_arm_names_keep_both_tables_as_they_were():
    r = _result("study_tiny")  # longest arm name: mc_advantage (12)
    sig = _sigmoids(r)
    assert len(sig) == 16
    assert sig[1] == ("  grpo          updates          A 89.8 (not identified), B 0.511 (not identified), "
                      "C_mid 57.1 (not identified)")
    assert sig[8] == ("  mc_advantage  generated_tokens A 100 (at bound), B 0.385 (not identified), "
                      "C_mid 1.25e+07 (not identified)")
    assert sig[15] == ("  grpo_2xlr     flops            A 100 (at bound), B 0.819 (not identified), "
                       "C_mid 1.38e+13 (not identified)")
    assert _side_effects(r, AXES) == [
        "side effects at matched generated_tokens (response length in tokens, format rate, KL to the initial policy "
        "in nats):",
        "  grpo          response_length 35.54, format_rate 1, kl_init 0.008363",
        "  mc_value      response_length 35.58, format_rate 1, kl_init 0.00469",
        "  mc_advantage  response_length 35.58, format_rate 1, kl_init 0.006164",
        "  hybrid_0.5    response_length 35.58, format_rate 1, kl_init 0.005172",
        "  grpo_2xlr     response_length 35.49, format_rate 1, kl_init 0.01057"]


def test_long_arm_names_keep_the_columns_in_line():
    r = _result("study_reward_granularity")  # longest arm name: process_hybrid_0.X (18): column of 19
    sig = [line for line in _sigmoids(r)[1:] if "process_hybrid_0.5" in line]
    assert sig[0].startswith("  process_hybrid_0.5 updates          A ")  # was "  process_hybrid_0.5updates"
    for line in _sigmoids(r)[1:]:
        assert line[2 + 19:].split()[0] in ("updates", "generated_tokens", "flops"), line
        assert line[2 + 18] == " " and line[2 + 19] != " ", line
    se = _side_effects(r, AXES)
    assert se[1] == "  grpo               response_length 35.54, format_rate 1, kl_init 0.008363"
    assert se[4] == "  process_hybrid_0.5 response_length 35.53, format_rate 1, kl_init 0.005024"
    assert all(line.index("response_length") == 21 for line in se[1:])


def test_a_long_name_that_never_trained_keeps_the_columns_in_line():
    never = [{"seed": 0, "cause": "all_zero_advantages", "why": "every advantage 0", "updates": 3}]
    side = {"response_length": 20.0, "format_rate": 0.9, "kl_init": 0.1}
    fit = {"error": "too few points; need 4"}
    r = {"arms": {"grpo": {"generated_tokens": {"side_effects": side}, "sigmoid": {"updates": fit}},
                  "a_very_long_arm_name": {"generated_tokens": {"side_effects": side}, "never_trained": never,
                                           "sigmoid": {"updates": fit}}}}
    sig, se = _sigmoids(r), _side_effects(r, ["generated_tokens"])
    assert sig[1] == "  grpo                 updates          no fit (too few points)"
    assert sig[2].startswith("  a_very_long_arm_name never trained: its fits are no learning curve")
    assert se[1] == "  grpo                 response_length 20, format_rate 0.9, kl_init 0.1"
    assert se[2].startswith("  a_very_long_arm_name never trained: ")
