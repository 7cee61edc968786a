"""A setting refused by the command line's flag was named as in a plan only (``gradprobe probe --temperature 0``:
"sampling.temperature must be a finite number > 0"; ``rank-prompts --decay 2``: "decay (gamma) must lie in (0, 1]"),
not by the flag the user typed (a trial user's finding): the commands now name both
(:func:`gradprobe.cli.args.flag_named`)."""

from __future__ import annotations

import pytest

from gradprobe.cli import main
from gradprobe.cli.args import flag_named


@pytest.mark.parametrize("argv, message", [
    (["probe", "--temperature", "0"],
     "gradprobe probe: error: sampling.temperature (--temperature) must be a finite number > 0, got 0.0\n"),
    (["probe", "--top-p", "2"], "gradprobe probe: error: sampling.top_p (--top-p) must be in (0, 1], got 2.0\n"),
    (["probe", "--max-new-tokens", "0"],
     "gradprobe probe: error: sampling.max_new_tokens (--max-new-tokens) must be >= 1, got 0\n"),
])
def test_probe_names_the_sampling_flag(tmp_path, capsys, argv, message):
    assert main([*argv, "--out", str(tmp_path / "p"), "--no-progress"]) == 2
    assert capsys.readouterr().err == message
    assert not (tmp_path / "p").exists()


def test_rank_prompts_names_the_estimator_flag(tmp_path, capsys):
    assert main(["rank-prompts", "--model", "tiny-qwen2", "--task", "chain_sum", "--pool", "4", "--decay", "2",
                 "--no-progress", "--out", str(tmp_path / "r")]) == 2
    assert capsys.readouterr().err == ("gradprobe rank-prompts: error: decay (gamma, --decay) must lie in (0, 1], "
                                       "got 2.0\n")


def test_other_messages_are_left_as_they_are():
    assert flag_named("sampling.temperatures must be ...") == "sampling.temperatures must be ..."
    assert flag_named("the sampling.temperature must be ...") == "the sampling.temperature must be ..."
