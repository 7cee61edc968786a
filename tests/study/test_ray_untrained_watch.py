"""The Ray executor looks at its running runs as the local pool does: its generator calls the study's ``tick`` after
each wait of up to POLL_SECONDS for a result (gradprobe.study.executors._iter_ray), so a run that trained no group in 3
updates in a row is said on the study's progress output while it goes on (gradprobe.study.orchestrator.UntrainedWatch),
not only when it ends. The runs of a Ray study write into the study folder, which the study process reads (a local
``ray.init()``: this machine; a cluster: a folder every node mounts at the same path).

A fake ``ray`` module (the generator alone: which waits tick, what is yielded) and a real local Ray cluster (the
shipped tiny tier, an arm whose plug-in reward returns a constant: tests/study/test_study_untrained_warning.py's
local-pool test, under Ray)."""

from __future__ import annotations

import sys
import types

import pytest

from gradprobe.study.executors import POLL_SECONDS, run_tasks
from gradprobe.study.runner import run_study

from helpers_rollout import one_thread
from helpers_untrained import blocking_study
from test_study_reward_plugins import _forget
from test_study_untrained_warning import _line

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)


class _FakeRay(types.ModuleType):
    """A ``ray`` whose tasks finish after so many waits each (``waits[i]``: the waits task i is still running for);
    records every call to ``wait`` (its timeout) and the study's ticks between them, in ``log``."""

    def __init__(self, waits: list[int]):
        super().__init__("ray")
        self.waits, self.log, self.calls = list(waits), [], 0

    def is_initialized(self):
        return True

    def remote(self, **options):
        def wrap(fn):
            return types.SimpleNamespace(remote=lambda task, threads: ("ref", task["seed"]))
        return wrap

    def wait(self, pending, num_returns, timeout=None):
        """As ray.wait: at most ``timeout`` seconds (one slice here), or, without one, until a task is ready."""
        self.log.append(("wait", timeout))
        while True:
            self.calls += 1
            ready = [r for r in pending if self.waits[r[1]] < self.calls][:num_returns]
            if ready or timeout is not None:
                return ready, [r for r in pending if r not in ready]

    def get(self, ref):
        return {"kind": "train", "arm": "a", "seed": ref[1], "status": "done"}

    def cancel(self, ref, force=False):
        self.log.append(("cancel", ref))


def test_the_ray_executor_ticks_after_every_wait_while_its_runs_go_on(monkeypatch):
    ray = _FakeRay([3, 1])  # seed 1 finishes at the 2nd wait, seed 0 at the 4th
    monkeypatch.setitem(sys.modules, "ray", ray)
    tasks = [{"kind": "train", "arm": "a", "seed": s} for s in (0, 1)]
    got = []
    gen = run_tasks("ray", tasks, workers=2, threads=1, tick=lambda: ray.log.append("tick"))
    for res in gen:
        got.append(res["seed"])
        ray.log.append(("result", res["seed"]))
    assert got == [1, 0]
    w = ("wait", POLL_SECONDS)
    assert ray.log == [w, "tick", w, "tick", ("result", 1), w, "tick", w, "tick", ("result", 0)]


def test_the_ray_executor_without_a_tick_waits_in_slices_too(monkeypatch):
    ray = _FakeRay([2])
    monkeypatch.setitem(sys.modules, "ray", ray)
    assert [r["seed"] for r in run_tasks("ray", [{"kind": "train", "arm": "a", "seed": 0}], workers=1,
                                         threads=1)] == [0]
    assert ray.log == [("wait", POLL_SECONDS)] * 3


@pytest.fixture
def constant_reward(tmp_path):
    """A plug-in reward file (its spec) whose fn is written by the test; forgotten afterwards."""
    rw = tmp_path / "const.py"
    spec = f"{rw}:fn"
    yield rw, spec
    _forget(spec, tmp_path)


def test_a_ray_study_says_it_while_the_run_goes_on(tmp_path, constant_reward, monkeypatch):
    """The reward blocks once the run has written 3 update lines until the study process has said so (the test's
    ``say`` then lets it go on, or 60 s pass): the line can only come from a look at the running run."""
    ray = pytest.importorskip("ray")
    plan, study, said, say = blocking_study(tmp_path, constant_reward, monkeypatch)
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        res = run_study(plan, study, executor="ray", workers=1, probe=False, analyze=False, check=False, say=say)
    finally:
        ray.shutdown()
    assert res.ok, res.summary()
    warned = [m for m in said if m.startswith("warning: run ")]
    assert warned == [_line("const", 3, 1, 3, True)]  # once: the 5 in a row at its end are the same level
    assert said.index(warned[0]) < next(i for i, m in enumerate(said) if m.startswith("run const seed 0 done: "))
