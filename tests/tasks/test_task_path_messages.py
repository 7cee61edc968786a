"""A data task's missing file: ``gsm8k:PATH:skip_malformed=true`` (the ``jsonl:`` spec's inline form) was a bare
"GSM8K source data/x.jsonl:skip_malformed=true does not exist", and a relative path did not say where it was looked
for (a trial user's plan named ``jsonl:data/tasks.jsonl`` and was run from another folder)."""

from __future__ import annotations

import pytest

from gradprobe.tasks import load_task


def test_gsm8k_inline_options_are_named_with_the_fix(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError) as e:
        load_task("gsm8k:data/tasks.jsonl:skip_malformed=true")
    assert str(e.value) == (
        "GSM8K source data/tasks.jsonl:skip_malformed=true does not exist (`gsm8k:PATH` takes no inline options such "
        "as 'skip_malformed=true': pass them as flags (--skip-malformed), a plan's [task.config] keys or load_task "
        f"keyword arguments); a relative path is read from the working directory, {tmp_path} (a plan's task path "
        "too, not from the plan's folder)")


def test_a_relative_jsonl_path_says_where_it_was_looked_for(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError) as e:
        load_task("jsonl:data/nope.jsonl")
    assert str(e.value).endswith(f"test.jsonl; a relative path is read from the working directory, {tmp_path} (a "
                                 "plan's task path too, not from the plan's folder))")
    with pytest.raises(FileNotFoundError) as e:
        load_task(f"gsm8k:{tmp_path / 'nope.jsonl'}")
    assert str(e.value) == f"GSM8K source {tmp_path / 'nope.jsonl'} does not exist"
