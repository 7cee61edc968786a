"""``skip_malformed`` (``--skip-malformed``) on a generated task is refused with the task kinds that take it,
read from the options :func:`gradprobe.tasks.load_task` checks (gsm8k, jsonl, hf), and the fix."""

from __future__ import annotations

import json

import pytest

from gradprobe.cli import main
from gradprobe.tasks import TaskConfigError, TaskNotFoundError, load_task, skip_malformed_kinds


def test_the_kinds_come_from_the_options_load_task_checks():
    assert skip_malformed_kinds() == ["gsm8k", "jsonl", "hf"]


@pytest.mark.parametrize("spec,config", [("chain_sum", {"skip_malformed": True}),
                                         ("chain_sum:min_terms=2,skip_malformed=true", {})])
def test_a_generated_task_is_refused_listing_the_kinds_and_the_fix(spec, config):
    with pytest.raises(TaskConfigError) as info:
        load_task(spec, **config)
    msg = str(info.value)
    assert "GSM8K tasks only" not in msg
    assert msg.startswith("skip_malformed (--skip-malformed) applies only to tasks read from data, whose rows can be "
                          "malformed: gsm8k (gsm8k or gsm8k:PATH), jsonl (jsonl:PATH), hf (hf:NAME); ")
    assert f"{spec!r} is a generated (reasoning-gym) task with no malformed rows" in msg
    assert "Fix: drop --skip-malformed (plans: remove skip_malformed from [task.config]" in msg


def test_the_message_follows_the_options(monkeypatch):
    import gradprobe.tasks as tasks

    monkeypatch.setitem(tasks.DATA_TASK_OPTIONS, "hf", ("heldout_fraction",))  # a kind that stops taking it
    with pytest.raises(TaskConfigError, match=r"malformed: gsm8k \(gsm8k or gsm8k:PATH\), jsonl \(jsonl:PATH\); "):
        load_task("chain_sum", skip_malformed=True)


def test_the_kinds_it_names_do_accept_it(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"question": f"{i} + 1?", "answer": str(i + 1)}) + "\n" for i in range(5)))
    assert load_task(f"jsonl:{path}", skip_malformed=True).skip_malformed is True
    assert load_task("gsm8k:tests/data/gsm8k", skip_malformed=True).skip_malformed is True
    with pytest.raises(TaskNotFoundError):  # an unknown name is reported as such, not as a generated task
        load_task("no_such_task", skip_malformed=True)


def test_the_cli_prints_it_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "rg"
    assert main(["probe", "--model", "tiny-qwen2", "--task", "chain_sum", "--skip-malformed", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "gsm8k (gsm8k or gsm8k:PATH), jsonl (jsonl:PATH), hf (hf:NAME)" in err and "drop --skip-malformed" in err
    assert not out.exists()
