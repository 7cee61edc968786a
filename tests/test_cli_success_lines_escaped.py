"""The lines the commands print when they finish or stop (``wrote OUT/...``, ``replaced the earlier probe in OUT``, a
warm-started tier's folder, an interrupted probe's line) show a path with a newline, tab or other control character
escaped as ``repr`` does (``a\\nb``: :func:`gradprobe.tables.shown`, as the tables do), so one path stays on one
line. They printed it raw: ``--out $'a\\nb'`` split ``wrote .../a`` and ``b/ranking.csv and ...`` over two lines.
Real runs of the cheapest commands (a pool of 4 prompts, a probe of 2x2 completions of 4 tokens) on tiny-qwen2."""

from __future__ import annotations

import json

import pytest

import gradprobe.warmstart
from difficulty_calls import argv
from gradprobe.cli import main
from gradprobe.cli.probe import interrupt_message
from gradprobe.probe.output import ProbeFolder, replacing_earlier_probe

ODD = "a\nb\tc\x1b"  #: a folder name with a newline, a tab and an escape
SHOWN = "a\\nb\\tc\\x1b"  #: how the lines show it


def _lines_starting(printed: str, opening: str) -> list[str]:
    return [line for line in printed.splitlines() if line.startswith(opening)]


def test_rank_prompts_says_what_it_wrote_on_one_line(tmp_path, capsys):
    out = tmp_path / ODD / "run"
    assert main(argv("rank-prompts", out)) == 0
    printed = capsys.readouterr().out
    assert _lines_starting(printed, "wrote ") == [f"wrote {tmp_path}/{SHOWN}/run/ranking.csv and "
                                                  f"{tmp_path}/{SHOWN}/run/rank.json"]
    assert (out / "ranking.csv").is_file() and json.loads((out / "rank.json").read_text())["command"] == "rank-prompts"


def test_difficulty_eval_says_what_it_wrote_on_one_line(tmp_path, capsys):
    out = tmp_path / ODD
    assert main(argv("difficulty-eval", out)) == 0
    printed = capsys.readouterr().out
    assert _lines_starting(printed, "wrote ") == [f"wrote {tmp_path}/{SHOWN}/metrics.json and "
                                                  f"{tmp_path}/{SHOWN}/reliability.png"]
    assert (out / "metrics.json").is_file() and (out / "reliability.png").is_file()


def test_probe_says_what_it_replaced_and_wrote_on_one_line_each(tmp_path, capsys):
    out = tmp_path / ODD
    out.mkdir()
    (out / "probe.json").write_text('{"rewards": []}')  # an earlier probe's files
    (out / "tokens.jsonl").write_text("old\n")
    assert main(["probe", "--model", "tiny-qwen2", "--task", "chain_sum", "--rewards", "outcome", "--prompts", "2",
                 "--group", "2", "--heldout-prompts", "1", "--heldout-group", "2", "--max-new-tokens", "4",
                 "--bootstrap", "0", "--no-progress", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert _lines_starting(printed, "replaced ") == [
        f"replaced the earlier probe in {tmp_path}/{SHOWN}: its files (probe.json, tokens.jsonl) were removed before "
        "this probe wrote its own"]
    at = f"{tmp_path}/{SHOWN}"
    assert _lines_starting(printed, "wrote ") == [
        f"wrote {at}/alignment.safetensors, {at}/probe.json, {at}/report.html and {at}/tokens.jsonl"]
    assert json.loads((out / "probe.json").read_text())["rewards"]


def test_an_interrupted_probe_names_its_folder_on_one_line(tmp_path):
    out = tmp_path / ODD
    assert interrupt_message(out) == (f"gradprobe probe: interrupted before the probe started; nothing was written "
                                      f"to {tmp_path}/{SHOWN}")
    line = interrupt_message(out, ProbeFolder(out, ["probe.json"]), how="terminated (SIGTERM)")
    assert line.startswith(f"gradprobe probe: terminated (SIGTERM); the unfinished probe's files in {tmp_path}/{SHOWN} "
                           "were removed; the earlier probe's files there (probe.json) were put back")
    assert "\n" not in line


def test_the_probe_folders_notes_name_it_on_one_line(tmp_path):
    """What a probe says about a killed probe's leftovers (``say``: the command's warnings)."""
    out = tmp_path / ODD
    out.mkdir()
    (out / "probe.json.tmp").write_text("partial")
    said = []
    with replacing_earlier_probe(out, say=said.append):
        pass
    assert said == [f"removed what a probe killed before it was complete left in {tmp_path}/{SHOWN} (probe.json.tmp)"]


@pytest.fixture
def built_tier(monkeypatch, tmp_path):
    """``gradprobe warmstart`` without the build: the folder and the record of a build of 3 s."""
    record = {"seconds": 3.0, "parameters": 1234, "final_sft_loss": 0.5,
              "eval": {"prompts": 8, "greedy_accuracy": 0.5, "samples": 4, "sampled_accuracy": 0.25,
                       "spread_fraction": 0.5}}
    monkeypatch.setattr(gradprobe.warmstart, "build_or_reuse_tier", lambda tier, **kw: (kw["out"], False))
    monkeypatch.setattr(gradprobe.warmstart, "tier_record", lambda path: record)


def test_warmstart_names_its_folder_on_one_line(tmp_path, capsys, built_tier):
    out = tmp_path / ODD
    assert main(["warmstart", "--out", str(out), "--no-progress"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == f"tier tiny (seed 0): {tmp_path}/{SHOWN}"


def test_an_interrupted_warmstart_names_its_folder_on_one_line(tmp_path, capsys, monkeypatch):
    def interrupted(tier, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(gradprobe.warmstart, "build_or_reuse_tier", interrupted)
    assert main(["warmstart", "--out", str(tmp_path / ODD), "--no-progress"]) == 130
    assert capsys.readouterr().err == (
        f"gradprobe warmstart: interrupted; the unfinished build was removed and nothing was written to --out "
        f"{tmp_path}/{SHOWN} (an earlier build there, if any, is kept); run the same command again to build the "
        "tier\n")
