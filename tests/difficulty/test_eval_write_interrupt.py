"""The writers of ``rank-prompts`` and ``difficulty-eval`` themselves leave no new file beside an earlier (or
no) last file when the last write does not finish (Ctrl-C included), so the Python API is covered as well
as the CLI."""

from __future__ import annotations

import pytest

import gradprobe
import gradprobe.cli.difficulty as difficulty_cli

from helpers_rollout import one_thread

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)  # tiny models: one thread


def _earlier(folder, names):
    folder.mkdir()
    for name in names:
        (folder / name).write_text("earlier")
    (folder / "notes.txt").write_text("mine")
    return folder


def test_api_rank_prompts_interrupted_in_rank_json_leaves_no_new_table(tmp_path, monkeypatch):
    out = _earlier(tmp_path / "rank", ["ranking.csv", "rank.json"])
    (out / "rank.json").write_text('{"command": "rank-prompts"}')  # an earlier ranking records its command
    seen = []

    def interrupted(path, data):
        seen.append((out / "ranking.csv").read_text().splitlines()[0])  # the new table is in place by now
        raise KeyboardInterrupt

    monkeypatch.setattr("gradprobe.difficulty.rank_pool.write_json_atomic", interrupted)
    with pytest.raises(KeyboardInterrupt):
        gradprobe.rank_prompts("tiny-qwen2", "chain_sum", 4, out=out, fit_prompts=2, probe_samples=1,
                               max_new_tokens=4, no_progress=True)
    assert seen == ["rank,prompt_id,p_hat,p_lo,p_hi,distance,attempts,successes,rate_lo,rate_hi,p_model,p_model_lo,"
                    "p_model_hi"]
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize("fail_in", ["plot", "json"])
def test_difficulty_eval_writer_removes_the_pair_when_a_write_does_not_finish(tmp_path, monkeypatch, fail_in):
    out = _earlier(tmp_path / "eval", ["reliability.png", "metrics.json"])

    def plot(result, path):
        path.write_bytes(b"new png")
        if fail_in == "plot":
            raise KeyboardInterrupt

    def write(path, data):
        assert (out / "reliability.png").read_bytes() == b"new png" and data == {"brier": None}
        raise KeyboardInterrupt

    monkeypatch.setattr(difficulty_cli, "plot_reliability", plot)
    monkeypatch.setattr(difficulty_cli, "write_json_atomic", write)
    with pytest.raises(KeyboardInterrupt):
        difficulty_cli._write_eval(out, {}, {"brier": float("nan")})
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


def test_difficulty_eval_writer_writes_both(tmp_path, monkeypatch):
    monkeypatch.setattr(difficulty_cli, "plot_reliability", lambda result, path: path.write_bytes(b"png"))
    difficulty_cli._write_eval(tmp_path, {}, {"brier": 0.25})
    assert (tmp_path / "reliability.png").read_bytes() == b"png"
    assert (tmp_path / "metrics.json").read_text() == '{\n  "brier": 0.25\n}'
