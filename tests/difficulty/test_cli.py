"""``gradprobe rank-prompts`` and ``gradprobe difficulty-eval`` end to end on the random tiny-qwen2
(success 0 everywhere: the commands must say so, not crash), and their bad input."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from gradprobe.cli import main

from helpers_rollout import one_thread

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)  # tiny models: one thread


def test_rank_prompts_end_to_end(tmp_path, capsys):
    out = tmp_path / "rank"
    rc = main(["rank-prompts", "--model", "tiny-qwen2", "--task", "chain_sum:min_terms=2,max_terms=3", "--pool", "10",
               "--fit-prompts", "4", "--probe-samples", "2", "--max-new-tokens", "8", "--out", str(out)])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    table = pd.read_csv(out / "ranking.csv")
    assert list(table.columns) == ["rank", "prompt_id", "p_hat", "p_lo", "p_hi", "distance", "attempts", "successes",
                                   "rate_lo", "rate_hi", "p_model", "p_model_lo", "p_model_hi"]
    assert len(table) == 10 and table.prompt_id.is_unique
    assert (table.distance == (table.p_hat - 0.5).abs()).all() and table.distance.is_monotonic_increasing
    assert table.attempts.sum() == 4 * 2 and table.successes.sum() == 0  # random model: never right
    info = json.loads((out / "rank.json").read_text())
    assert info["no_signal"] is True and "failed" in info["warning"]
    assert info["verdict"]["fail_more_often"] is True and "verdict: candidates are predicted to fail" in cap.out
    assert "no model signal" in cap.err
    led = info["ledger"]
    assert led["generated_tokens"]["selection"] > 0 and led["flops"]["selection"] > 0


def test_difficulty_eval_end_to_end(tmp_path, capsys):
    out = tmp_path / "eval"
    rc = main(["difficulty-eval", "--model", "tiny-qwen2", "--task", "chain_sum", "--pool", "6", "--samples", "4",
               "--max-new-tokens", "8", "--out", str(out)])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    m = json.loads((out / "metrics.json").read_text())
    for key in ("brier", "auc", "spearman_rho", "estimators", "baselines", "protocol", "ledger"):
        assert key in m
    assert set(m["baselines"]) == {"pool_mean", "posterior_pool_mean"}
    assert m["auc"] is None and m["spearman_rho"] is None and m["brier"] >= 0  # no success: undefined, said so
    assert m["split"]["observed_per_eval_prompt"] == 1 and m["split"]["target_per_eval_prompt"] == 3
    assert any("every target completion failed" in n for n in m["notes"]) and "note: every target" in cap.out
    assert any(n.startswith("only 3 eval prompts") for n in m["notes"]) and "note: only 3 eval prompts" in cap.out
    assert (out / "reliability.png").stat().st_size > 1000
    assert m["ledger"]["generated_tokens"]["eval"] > 0


@pytest.mark.parametrize("argv, message", [
    (["difficulty-eval", "--pool", "1", "--samples", "4"], "--pool must be >= 2"),
    (["difficulty-eval", "--pool", "4", "--samples", "2", "--observed", "2"], "must be smaller than --samples"),
    (["rank-prompts", "--pool", "4", "--task", "chain_sum:bogus=1"], "bogus"),
    (["rank-prompts", "--pool", "4", "--prior-strength", "-1"], "prior_strength (n0, --prior-strength) must be"),
])
def test_bad_input_exits_2_with_a_message(tmp_path, capsys, argv, message):
    base = {"--model": "tiny-qwen2", "--task": "chain_sum", "--out": str(tmp_path / "o")}
    for k, v in base.items():
        if k not in argv:
            argv = argv + [k, v]
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_pool_of_zero_is_refused_by_the_parser(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["rank-prompts", "--model", "tiny-qwen2", "--task", "chain_sum", "--pool", "0", "--out", str(tmp_path)])
    assert "must be >= 1" in capsys.readouterr().err


def test_refused_input_leaves_no_output_folder(tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["rank-prompts", "--model", "no-such-model", "--task", "chain_sum", "--pool", "4",
                 "--out", str(out)]) == 2
    assert "no-such-model" in capsys.readouterr().err and not out.exists()
    assert main(["difficulty-eval", "--model", "tiny-qwen2", "--task", "chain_sum", "--skip-malformed",
                 "--pool", "4", "--out", str(out)]) == 2
    assert "applies only to tasks read from data" in capsys.readouterr().err and not out.exists()


def test_skip_malformed_on_real_gsm8k_rows(tmp_path, capsys, gsm8k_dir):
    lines = (gsm8k_dir / "train.jsonl").read_text().splitlines()[:8]
    src = tmp_path / "gsm8k.jsonl"
    src.write_text("\n".join(lines[:3] + ['{"question": "q", "answer": "no final answer"}'] + lines[3:]) + "\n")
    argv = ["rank-prompts", "--model", "tiny-qwen2", "--task", f"gsm8k:{src}", "--pool", "4", "--fit-prompts", "4",
            "--probe-samples", "2", "--max-new-tokens", "4"]
    assert main([*argv, "--out", str(tmp_path / "strict")]) == 2
    assert "line 4" in capsys.readouterr().err and not (tmp_path / "strict").exists()
    with pytest.warns(UserWarning, match="skipping malformed GSM8K row"):
        assert main([*argv, "--skip-malformed", "--out", str(tmp_path / "ok")]) == 0
    saved = json.loads((tmp_path / "ok" / "rank.json").read_text())
    assert saved["skipped_rows"] == 1 and saved["settings"]["skip_malformed"] is True


def test_a_metadata_key_in_no_prompt_is_warned_with_the_keys_present(tmp_path):
    with pytest.warns(UserWarning, match=r"metadata_keys \(--metadata-keys\) nosuch: in no prompt .*keys present: .*num_terms"):
        assert main(["difficulty-eval", "--model", "tiny-qwen2", "--task", "chain_sum", "--pool", "4", "--samples", "2",
                     "--max-new-tokens", "4", "--metadata-keys", "num_terms,nosuch", "--out", str(tmp_path / "o")]) == 0
