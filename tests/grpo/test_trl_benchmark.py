"""The TRL throughput benchmark runs end to end on the shipped tiny tier (a smoke test: the figures
themselves are measured by running the script, see benchmarks/trl_throughput.py)."""

from __future__ import annotations

import json

from conftest import load_benchmark


def test_benchmark_runs_on_the_tiny_tier_and_reports_consistent_figures(tmp_path, capsys):
    bench = load_benchmark("trl_throughput")
    out = tmp_path / "bench.json"
    assert bench.main(["--model", "tiny", "--updates", "1", "--warmup", "0", "--rounds", "1", "--prompts", "2",
                       "--group", "2", "--max-completion-length", "24", "--pool", "16", "--no-eager-variant",
                       "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "model: tiny" in printed and "ours/TRL" in printed
    s = json.loads(out.read_text())["summary"]
    assert s["ours_tokens_per_second"] > 0 and s["trl_tokens_per_second"] > 0
    assert abs(s["ratio"] - s["ours_tokens_per_second"] / s["trl_tokens_per_second"]) < 1e-9
    # statistics only add time: the ratio that counts them cannot exceed the update-only ratio
    assert s["ratio_with_policy_stats"] <= s["ratio"] + 1e-12
    # both sides generate at most B x G x L tokens per update, and at least one per completion
    for side in ("ours", "trl"):
        assert 4 <= s["tokens_per_update"][side] <= 2 * 2 * 24
