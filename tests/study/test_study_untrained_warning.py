"""A run of a study that trains no group in 3 updates in a row (gradprobe.training.update.warn_untrained, which warns
in the run's own train.log) is said on the study's progress output too, where a user watching the study looks: one
line per run and level (3 updates, 30 updates), naming the updates, the cause and the run's train.log; while the run
goes on under the local pool (its ticks), and when it finishes under every executor (inline here).

The studies: the shipped tiny tier (tests/helpers_training.tiny_plan) with an arm whose plug-in reward returns a
constant, so that every group is flat; the watch alone: fabricated metrics.jsonl lines
(tests/study/test_ranking_never_trained._update)."""

from __future__ import annotations

import json

import pytest

from gradprobe.study.orchestrator import UntrainedWatch, longest_untrained_row
from gradprobe.study.runner import run_study
from gradprobe.training.update import UNTRAINED_WARN_UPDATES

from helpers_rollout import one_thread
from helpers_training import tiny_plan
from helpers_untrained import blocking_study
from test_ranking_never_trained import _update
from test_study_reward_plugins import _forget

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)  # inline runs: one torch thread

FLAT = "every group's rewards were equal (all groups flat: zero variance)"
CONSTANT = "def fn(prompts, completions, **kwargs):\n    return [1.0 for _ in completions]\n"


def _line(arm: str, n: int, first: int, last: int, running: bool, why: str = FLAT) -> str:
    return (f"warning: run {arm} seed 0: {n} updates in a row trained no group (updates {first}-{last}, every "
            f"advantage 0): {why}; {'the run goes on; ' if running else ''}see runs/{arm}/seed0/train.log for what to "
            "change")


def _write(root, arm: str, lines: list[dict], tail: str = "") -> None:
    folder = root / "runs" / arm / "seed0"
    folder.mkdir(parents=True, exist_ok=True)
    evals = [{"update": 0, "eval": True, "greedy_accuracy": 0.2}]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in evals + lines) + tail)


# ----------------------------------------------------------------------------- the watch on fabricated files

def test_the_watch_says_each_run_once_per_level_while_it_runs_and_when_it_ends(tmp_path):
    assert UNTRAINED_WARN_UPDATES == 3
    said = []
    watch = UntrainedWatch(tmp_path, [("flat", 0), ("late", 0), ("cut", 0), ("none", 0)], said.append, every=0)
    flat = [_update(u, adv=0.0) for u in range(1, 36)]
    _write(tmp_path, "flat", flat[:2])
    watch.poll()
    assert said == []  # 2 updates: below the level
    _write(tmp_path, "flat", flat[:3], tail='{"update": 4, "advantage_abs')  # update 4 half written: skipped,
    watch.poll()  # the 3 whole lines before it read
    assert said == [_line("flat", 3, 1, 3, True)]
    _write(tmp_path, "flat", flat[:4])
    watch.poll()
    watch.poll()  # the file did not change: not read again, nothing said again
    _write(tmp_path, "flat", flat[:29])
    watch.poll()  # level 3 was said: not again for this run
    assert said == [_line("flat", 3, 1, 3, True)]
    _write(tmp_path, "flat", flat[:31])
    watch.poll()  # 30 in a row: once more (the tail read: the last 30 updates)
    assert said[1:] == [_line("flat", 30, 2, 31, True)]
    _write(tmp_path, "flat", flat)
    watch.finished("flat", 0)  # 35 in a row at its end: both levels said already
    assert len(said) == 2 and ("flat", 0) not in watch.running
    # a row of 4 that ended before the run did, said when it finishes (no tick saw it); the cause with its figures
    _write(tmp_path, "late", [_update(u, adv=0.0) for u in range(1, 5)] + [_update(5, adv=0.5)])
    cut = [_update(u, adv=0.0, truncation=1.0) for u in range(1, 4)]
    _write(tmp_path, "cut", cut)
    (tmp_path / "runs" / "cut" / "seed0" / "config.json").write_text(
        json.dumps({"run": {"sampling": {"max_new_tokens": 7}}}))
    watch.finished("late", 0)
    watch.finished("cut", 0)
    watch.finished("none", 0)  # no metrics.jsonl: nothing
    truncated = ("every completion was truncated at max_new_tokens = 7 (truncation_rate 1.0), so every group's "
                 "rewards were equal")
    assert said[2:] == [_line("late", 4, 1, 4, False), _line("cut", 3, 1, 3, False, truncated)]
    assert watch.said == {("flat", 0): 30, ("late", 0): 3, ("cut", 0): 3}


def test_the_watch_looks_at_most_every_so_many_seconds_and_reads_the_longest_row(tmp_path):
    said = []
    watch = UntrainedWatch(tmp_path, [("flat", 0)], said.append, every=3600)
    _write(tmp_path, "flat", [_update(u, adv=0.0) for u in range(1, 3)])
    watch.poll()  # the first look: 2 updates
    _write(tmp_path, "flat", [_update(u, adv=0.0) for u in range(1, 5)])
    watch.poll()  # within the hour: no second look
    assert said == []
    rows = [_update(1, adv=0.0), _update(2, adv=0.3), *(_update(u, adv=0.0) for u in range(3, 6)), _update(6, adv=1.0),
            _update(7, adv=0.0)]
    _write(tmp_path, "flat", rows[:1] + [{"update": 1, "eval": True}] + rows[1:])
    assert [x["update"] for x in longest_untrained_row(tmp_path / "runs" / "flat" / "seed0" / "metrics.jsonl")] == [
        3, 4, 5]
    assert longest_untrained_row(tmp_path / "nowhere.jsonl") == []


# ----------------------------------------------------------------------------- real tiny studies

@pytest.fixture
def constant_reward(tmp_path):
    """A plug-in reward file whose fn returns 1.0 for every completion (so every group is flat); its spec; forgotten
    afterwards (the reward registry and sys.modules as before)."""
    rw = tmp_path / "const.py"
    rw.write_text(CONSTANT)
    spec = f"{rw}:fn"
    yield rw, spec
    _forget(spec, tmp_path)


def test_an_inline_study_says_the_run_that_trained_nothing_when_it_finishes(tmp_path, constant_reward):
    _, spec = constant_reward
    plan = tmp_path / "plan.toml"
    plan.write_text(tiny_plan(arms={"grpo": {"reward": "outcome"}, "const": {"reward": spec}}, budget={"updates": 4},
                              eval={"sampled": False}))
    said = []
    with pytest.warns(RuntimeWarning, match=r"^updates 1-3: no group trained in 3 updates in a row") as caught:
        res = run_study(plan, tmp_path / "study", executor="inline", probe=False, analyze=False, check=False,
                        say=said.append)
    assert any(spec in str(w.message) for w in caught)  # the run's own warning (in its train.log outside pytest)
    assert res.ok, res.summary()
    warned = [m for m in said if m.startswith("warning: run ")]
    row = longest_untrained_row(tmp_path / "study" / "runs" / "grpo" / "seed0" / "metrics.jsonl")
    assert [m for m in warned if m.startswith("warning: run const ")] == [_line("const", 4, 1, 4, False)]
    assert len([m for m in warned if m.startswith("warning: run grpo ")]) == (len(row) >= 3)  # said iff it was so
    done = next(i for i, m in enumerate(said) if m.startswith("run const seed 0 done: 4 updates"))
    assert said[done + 1] == _line("const", 4, 1, 4, False)  # right after the run's progress line


def test_a_local_pool_study_says_it_while_the_run_goes_on(tmp_path, constant_reward, monkeypatch):
    """The reward blocks once the run has written 3 update lines until the study process has said so (the test's
    ``say`` then lets it go on, or 60 s pass): the line can only come from a look at the running run."""
    plan, study, said, say = blocking_study(tmp_path, constant_reward, monkeypatch)
    res = run_study(plan, study, executor="local", workers=1, probe=False, analyze=False, check=False, say=say)
    assert res.ok, res.summary()
    warned = [m for m in said if m.startswith("warning: run ")]
    assert warned == [_line("const", 3, 1, 3, True)]  # once: the 5 in a row at its end are the same level
    assert said.index(warned[0]) < next(i for i, m in enumerate(said) if m.startswith("run const seed 0 done: "))
    log = (study / "runs" / "const" / "seed0" / "train.log").read_text()
    assert "updates 1-3: no group trained in 3 updates in a row (every advantage 0): " + FLAT in log
