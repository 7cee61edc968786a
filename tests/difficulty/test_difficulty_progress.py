"""``gradprobe difficulty-eval`` and ``rank-prompts`` show their sampling progress (tqdm, with ETA) on stderr, and
``--no-progress`` hides it; stdout (the results) is the same either way."""

from __future__ import annotations

import re

import pytest

from gradprobe.cli import main

ARGS = ["--model", "tiny-qwen2", "--task", "chain_sum", "--max-new-tokens", "4", "--batch-size", "4"]
BAR = re.compile(r"(difficulty-eval|rank-prompts): sampling (\d+) x (\d+) prompts: +\d+%\|[^|]*\| *(\d+)/(\d+) "
                 r"\[[\d:]+<[\d:?]+")  # tqdm: done/total [elapsed<ETA (within one bar: the other bars follow)


@pytest.mark.parametrize("command, extra, samples, prompts", [
    ("difficulty-eval", ["--pool", "4", "--samples", "2"], 2, 4),
    ("rank-prompts", ["--pool", "4", "--probe-samples", "2", "--fit-prompts", "3"], 2, 3),
])
def test_progress_on_stderr_and_no_progress_hides_it(tmp_path, capsys, command, extra, samples, prompts):
    assert main([command, *ARGS, *extra, "--out", str(tmp_path / "a")]) == 0
    shown = capsys.readouterr()
    bars = [m.groups() for m in BAR.finditer(shown.err)]
    assert bars, shown.err
    assert {b[:3] for b in bars} == {(command, str(samples), str(prompts))}
    assert {b[4] for b in bars} == {str(samples * prompts)}  # one bar over every completion to sample
    assert "ETA" not in shown.out and "%|" not in shown.out  # results stay on stdout, the bar on stderr

    assert main([command, *ARGS, *extra, "--out", str(tmp_path / "b"), "--no-progress"]) == 0
    quiet = capsys.readouterr()
    assert "%|" not in quiet.err and "sampling" not in quiet.err
    strip = lambda s: s.replace(str(tmp_path / "a"), "OUT").replace(str(tmp_path / "b"), "OUT")  # noqa: E731
    # same results either way (the timing figures of rank-prompts' cost line aside)
    assert [x for x in strip(shown.out).splitlines() if "selection cost" not in x] == \
           [x for x in strip(quiet.out).splitlines() if "selection cost" not in x]
