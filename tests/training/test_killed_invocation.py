"""A ``gradprobe train`` invocation killed (SIGKILL: no handler runs) and then resumed is recorded in
``summary.json`` ``invocations`` as ``"ended": "killed"``, the word a study records for the same event
(:mod:`gradprobe.study.invocations`); Ctrl-C and SIGTERM as ``"interrupted"`` and ``"terminated (SIGTERM)"``.
Every stop used to be recorded as ``"stopped"``. A kill is simulated by raising out of the training loop with
:func:`gradprobe.training.run.end_invocation` made a no-op (SIGKILL runs nothing), which leaves ``DIR/.invocation.json``
unfinished (``ended`` null) as a real kill does."""

from __future__ import annotations

import json

import pytest

from gradprobe.training.plan import parse_plan
from gradprobe.training.run import run_training
from gradprobe.training.state import INVOCATION_END, resumed_invocations

from helpers_training import tiny_plan


class Terminated(Exception):
    """Named as the CLI's SIGTERM exception (gradprobe.cli.probe.Terminated)."""


def _stopped_at_3_then_resumed(tmp_path, stop, monkeypatch=None):
    run = parse_plan(tiny_plan(budget={"updates": 4}, train={"checkpoint_every": 2})).arm("grpo")
    out = tmp_path / "run"

    def stop_at_3(update):
        if update == 3:
            raise stop

    with pytest.raises(type(stop)):
        run_training(run, out, after_update=stop_at_3)
    if monkeypatch is not None:
        monkeypatch.undo()
    mark = json.loads((out / INVOCATION_END).read_text())
    summary = run_training(run, out)
    assert summary["completed"] and summary["resumed_from_update"] == [2]
    assert not (out / INVOCATION_END).exists()  # a completed run keeps no record
    return mark, summary["invocations"]


def test_a_killed_invocation_is_recorded_as_killed(tmp_path, monkeypatch):
    monkeypatch.setattr("gradprobe.training.run.end_invocation", lambda s, e: None)  # SIGKILL: no handler runs
    mark, (first, second) = _stopped_at_3_then_resumed(tmp_path, RuntimeError("SIGKILL"), monkeypatch)
    assert mark == {"from_update": 0, "ended": None}
    assert first["from_update"] == 0 and first["to_update"] == 3 and first["ended"] == "killed"
    assert second["from_update"] == 2 and second["ended"] == "budget"


def test_ctrl_c_and_sigterm_are_recorded_as_a_study_records_them(tmp_path):
    mark, (first, _) = _stopped_at_3_then_resumed(tmp_path / "c", KeyboardInterrupt())
    assert mark == {"from_update": 0, "ended": "interrupted"} and first["ended"] == "interrupted"
    mark, (first, _) = _stopped_at_3_then_resumed(tmp_path / "t", Terminated())
    assert first["ended"] == "terminated (SIGTERM)"


def _ckpt(metrics_bytes=0):
    return {"update": 2, "metrics_bytes": metrics_bytes, "invocations": [{"from_update": 0, "seconds": 1.0}]}


@pytest.mark.parametrize("mark, ended", [
    ({"from_update": 0, "ended": None}, "killed"),
    ({"from_update": 0, "ended": "interrupted"}, "interrupted"),
    ({"from_update": 0, "ended": "non_finite_loss"}, "non_finite_loss"),
    ({"from_update": 2, "ended": None}, "stopped"),  # a later invocation's record: this one's end is unknown
    (None, "stopped"),  # no record: a run folder of an older gradprobe
    ("not json", "stopped"),
    ({"from_update": 0, "ended": 5}, "stopped"),  # an end that is no text: unknown, not killed
    ({"from_update": 0, "ended": ["a"]}, "stopped"),
    ({"from_update": 0}, "stopped"),  # no "ended" at all: not the record training writes
])
def test_resumed_invocations_reads_the_end_record(tmp_path, mark, ended):
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text("")
    if mark is not None:
        (tmp_path / INVOCATION_END).write_text(mark if isinstance(mark, str) else json.dumps(mark))
    first, now = resumed_invocations(_ckpt(), metrics)
    assert first == {"from_update": 0, "seconds": 1.0, "to_update": 2, "ended": ended}
    assert now == {"from_update": 2, "seconds": 0.0}


def test_a_write_error_is_recorded_even_where_summary_json_cannot_be_written(tmp_path, monkeypatch):
    """A run stopped by an OutputDirError whose summary.json cannot be written either (a full disk) still records its
    end as write_error, not as a kill found on resume (a reviewer's case)."""
    import gradprobe.training.run as run_module
    from gradprobe.outputs import OutputDirError

    recorded = []

    def full_disk(*args, **kwargs):
        raise OutputDirError(28, "no space left")

    class _S:
        out = tmp_path

    monkeypatch.setattr(run_module, "start_invocation", lambda s: None)
    monkeypatch.setattr(run_module, "_train", full_disk)
    monkeypatch.setattr(run_module, "finish", full_disk)
    monkeypatch.setattr(run_module, "record_end", lambda s, ended: recorded.append(ended))
    s = _S()
    s.metrics = s.items = type("F", (), {"close": lambda self: None})()
    with pytest.raises(OutputDirError):
        run_module._train_recorded(s, None)
    assert recorded == ["write_error"]
