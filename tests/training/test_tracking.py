"""``--report-to``: a short run of the shipped tiny tier logs to TensorBoard exactly what metrics.jsonl holds."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from gradprobe.cli import main
from gradprobe.tracking import TrackerUnavailableError, metrics_scalars, open_tracker, require_tracker
from gradprobe.training.plan import parse_plan
from gradprobe.training.run import run_training

from helpers_rollout import one_thread
from helpers_training import metric_lines, tiny_plan

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)


def _plan(updates: int = 3, at_updates: tuple[int, ...] = (2,)) -> str:
    """The shipped tiny tier on its frontier task, ``updates`` updates of 2 prompts x 4 completions
    (at most 24 tokens), evaluated on 4 held-out prompts at ``at_updates`` and at the end."""
    return tiny_plan(name="tracking_check", task={"pool": 16}, sampling={"max_new_tokens": 24},
                     train={"lr": 1e-3, "checkpoint_every": 2}, budget={"updates": updates},
                     eval={"at_updates": list(at_updates)})


PLAN = _plan()


class Killed(Exception):
    pass


def _events(log_dir: Path) -> dict[str, dict[int, list[float]]]:
    """{tag: {step: [values]}} of every scalar in ``log_dir``'s event files, read back as the TensorBoard
    server reads them (its plugin accumulator: purges a restarted writer's later steps)."""
    from tensorboard.backend.event_processing.plugin_event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    acc = EventAccumulator(str(log_dir), size_guidance={"tensors": 0})
    acc.Reload()
    out: dict = {}
    for tag in acc.Tags()["tensors"]:
        if acc.SummaryMetadata(tag).plugin_data.plugin_name != "scalars":  # the run's config, as text
            continue
        for ev in acc.Tensors(tag):
            out.setdefault(tag, {}).setdefault(ev.step, []).append(tensor_util.make_ndarray(ev.tensor_proto).item())
    return out


def _expected(lines: list[dict]) -> dict[str, dict[int, list[float]]]:
    out: dict = {}
    for line in lines:
        for tag, value in metrics_scalars(line).items():
            out.setdefault(tag, {}).setdefault(line["update"], []).append(value)
    return out


def test_tensorboard_scalars_equal_metrics_jsonl_per_step(tmp_path, capsys):
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    out = tmp_path / "run"
    assert main(["train", "--plan", str(plan), "--arm", "grpo", "--out", str(out), "--no-progress",
                 "--report-to", "tensorboard"]) == 0, capsys.readouterr().err
    lines = metric_lines(out)
    updates = [x for x in lines if not x.get("eval")]
    evals = [x for x in lines if x.get("eval")]
    assert [x["update"] for x in updates] == [1, 2, 3] and [x["update"] for x in evals] == [0, 2, 3]
    got = _events(out / "tb")
    # independently of the flattening: the figures a reader looks at, each at its update
    for x in updates:
        for tag, value in (("train/loss", x["loss"]), ("train/reward_mean", x["reward_mean"]),
                           ("train/grad_norm", x["grad_norm"]), ("train/generated_tokens", x["generated_tokens"]),
                           ("train/update_generated_tokens/rollout", x["update_generated_tokens"]["rollout"]),
                           ("ledger/generated_tokens/rollout", x["ledger"]["generated_tokens"]["rollout"]),
                           ("ledger/generated_tokens/eval", x["ledger"]["generated_tokens"]["eval"]),
                           ("ledger/charged_generated_tokens", x["ledger"]["charged_generated_tokens"]),
                           ("ledger/flops/training", x["ledger"]["flops"]["training"])):
            assert got[tag][x["update"]] == [value], tag  # double precision: equal, not approximately
    for x in evals:
        assert got["eval/greedy_accuracy"][x["update"]] == [x["greedy_accuracy"]]
        assert got["eval/eval_tokens"][x["update"]] == [x["eval_tokens"]]
    assert updates[-1]["ledger"]["generated_tokens"]["rollout"] > 0 and evals[0]["eval_tokens"] > 0
    # and every logged scalar is a value of metrics.jsonl, every number of metrics.jsonl is logged
    assert got == _expected(lines)
    assert len(got) > 30 and not any(t.startswith("train/") and 0 in steps for t, steps in got.items())
    assert '"arm": "grpo"' in _config_text(out / "tb")  # the RunConfig, once, as a text summary


def _config_text(log_dir: Path) -> str:
    from tensorboard.backend.event_processing.plugin_event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    acc = EventAccumulator(str(log_dir), size_guidance={"tensors": 0})
    acc.Reload()
    [ev] = acc.Tensors("config/text_summary")
    return tensor_util.make_ndarray(ev.tensor_proto).item().decode()


def test_resumed_run_shows_each_update_once(tmp_path):
    """Killed after update 3 (checkpoint at 2): the rerun redoes update 3; TensorBoard purges the first try's."""
    run = parse_plan(_plan(updates=4)).arm("grpo")
    out = tmp_path / "run"

    def kill(update):
        if update == 3:
            raise Killed

    with pytest.raises(Killed):
        run_training(run, out, report_to="tensorboard", after_update=kill)
    first = _events(out / "tb")
    assert sorted(first["train/loss"]) == [1, 2, 3]
    run_training(run, out, report_to="tensorboard")
    got = _events(out / "tb")
    lines = metric_lines(out)
    assert [x["update"] for x in lines if not x.get("eval")] == [1, 2, 3, 4]
    assert sorted(got["train/loss"]) == [1, 2, 3, 4] and all(len(v) == 1 for v in got["train/loss"].values())
    assert got == _expected(lines)


def test_study_logs_each_run_under_tb_arm_seed(tmp_path):
    plan = tmp_path / "plan.toml"
    plan.write_text(_plan(updates=1, at_updates=()))
    study = tmp_path / "study"
    assert main(["study", str(plan), "--out", str(study), "--executor", "inline", "--no-probe", "--no-analysis",
                 "--quiet", "--report-to", "tensorboard"]) == 0
    got = _events(study / "tb" / "grpo" / "seed0")
    assert got == _expected(metric_lines(study / "runs" / "grpo" / "seed0"))
    assert sorted(got["eval/greedy_accuracy"]) == [0, 1] and sorted(got["train/loss"]) == [1]


@pytest.mark.parametrize("name,module", [("tensorboard", "torch.utils.tensorboard"), ("trackio", "trackio"),
                                         ("wandb", "wandb")])
def test_missing_tracker_fails_before_anything_is_loaded_or_written(tmp_path, monkeypatch, capsys, name, module):
    import gradprobe.training.run as run_mod

    monkeypatch.setitem(sys.modules, module, None)  # `import module` now raises ImportError, as if not installed

    def never(*a, **k):
        raise AssertionError("the policy was loaded: training started before the tracker check")

    monkeypatch.setattr(run_mod, "load_run_policy", never)
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    assert main(["train", "--plan", str(plan), "--arm", "grpo", "--out", str(tmp_path / "run"), "--no-progress",
                 "--report-to", name]) == 2
    err = capsys.readouterr().err
    assert f"--report-to {name}" in err and f"pip install {name}" in err and "--report-to none" in err
    assert not (tmp_path / "run").exists()
    assert main(["study", str(plan), "--out", str(tmp_path / "study"), "--executor", "inline",
                 "--report-to", name]) == 2
    assert f"pip install {name}" in capsys.readouterr().err and not (tmp_path / "study").exists()
    with pytest.raises(TrackerUnavailableError, match=f"pip install {name}"):
        run_training(parse_plan(PLAN).arm("grpo"), tmp_path / "run", report_to=name)
    assert not (tmp_path / "run").exists()


def test_unknown_tracker_name_lists_the_valid_ones():
    with pytest.raises(ValueError, match="choose one of none, tensorboard, trackio, wandb"):
        require_tracker("mlflow")
    require_tracker("none")
    require_tracker(None)


def _recorder(name: str, calls: list) -> types.ModuleType:
    """A stand-in for the wandb/trackio module that records the calls gradprobe makes."""
    mod = types.ModuleType(name)

    class Run:
        def log(self, data, step=None):
            calls.append(("log", dict(data), step))

        def finish(self):
            calls.append(("finish",))

    def init(**kw):
        calls.append(("init", kw))
        return Run()

    mod.init = init
    mod.log = lambda data, step=None: calls.append(("log", dict(data), step))
    mod.finish = lambda: calls.append(("finish",))
    return mod


@pytest.mark.parametrize("wandb_mode", [None, "online"])
def test_wandb_is_offline_unless_wandb_mode_is_set(tmp_path, monkeypatch, wandb_mode):
    calls: list = []
    monkeypatch.setitem(sys.modules, "wandb", _recorder("wandb", calls))
    if wandb_mode is None:
        monkeypatch.delenv("WANDB_MODE", raising=False)
    else:
        monkeypatch.setenv("WANDB_MODE", wandb_mode)
    run = parse_plan(PLAN).arm("grpo", seed=2)
    tracker = open_tracker("wandb", tmp_path / "tb", run=run)
    tracker.log_line({"update": 3, "loss": 0.25, "kl_init": None, "ledger": {"generated_tokens": {"rollout": 96}}})
    tracker.log_line({"eval": True, "update": 3, "greedy_accuracy": 0.5, "sampled_accuracy": float("nan")})
    tracker.close()
    tracker.close()
    init = calls[0][1]
    assert init["project"] == "tracking_check" and init["name"] == "grpo-seed2" and init["dir"] == str(tmp_path / "tb")
    assert init["group"] == run.plan_sha256[:12] and init["config"]["seed"] == 2
    assert ("mode" in init) == (wandb_mode is None) and init.get("mode", "offline") == "offline"
    assert calls[1:] == [("log", {"train/loss": 0.25, "ledger/generated_tokens/rollout": 96.0}, 3),
                         ("log", {"eval/greedy_accuracy": 0.5}, 3), ("finish",)]


def test_trackio_logs_each_line_at_its_update(tmp_path, monkeypatch):
    calls: list = []
    monkeypatch.setitem(sys.modules, "trackio", _recorder("trackio", calls))
    tracker = open_tracker("trackio", tmp_path / "tb", run=parse_plan(PLAN).arm("grpo"))
    tracker.log_line({"update": 1, "reward_mean": 0.75, "truncated": True, "note": "x"})
    tracker.close()
    assert calls[0][0] == "init" and calls[0][1]["name"] == "grpo-seed0"
    assert calls[1:] == [("log", {"train/reward_mean": 0.75}, 1), ("finish",)]
    assert open_tracker("none", tmp_path / "none", run=parse_plan(PLAN).arm("grpo")) is None
    assert not (tmp_path / "none").exists()
