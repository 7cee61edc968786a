"""`gradprobe study` on toy plans (random tiny-qwen2, a handful of updates): a SIGKILLed study
resumes without redoing or losing finished runs; Ray; NaN runs; the probe step; bad input."""

from __future__ import annotations

import csv
import errno
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from gradprobe.cli import main as cli_main
from gradprobe.rewards import REWARDS
from gradprobe.study import freeze
from gradprobe.study.runner import PlanChangedError, StudyError, freeze_plan, run_dir, run_study
from gradprobe.training.checkpoint import OutputDirError, output_error
from gradprobe.training.plan import PlanError

from helpers_rollout import one_thread
from helpers_tasks import exploding_reward
from study_helpers import toy_plan, write_plan

REPO = Path(__file__).resolve().parents[2]

TOY = toy_plan("toy", seeds=(0, 1, 2), generated_tokens=700, checkpoint_every=2)


_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)  # tiny models: one thread


def _plan(tmp_path: Path, text: str = TOY, name: str = "plan.toml") -> Path:
    return write_plan(tmp_path, text, name)


def _csv(out: Path) -> list[dict]:
    with open(out / "runs.csv") as f:
        return list(csv.DictReader(f))


def _evals(folder: Path) -> list[dict]:
    return [json.loads(x) for x in (folder / "metrics.jsonl").read_text().splitlines() if '"eval": true' in x]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purpose
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def test_killed_study_resumes_without_redoing_or_losing_a_finished_run(tmp_path):
    plan = _plan(tmp_path, TOY.replace("seeds = [0, 1, 2]", "seeds = [0, 1]").replace(
        "generated_tokens = 700", "generated_tokens = 2500"))  # ~20 updates: seed 1 cannot finish in the
    # up to 0.5 s an orphaned worker takes to notice its parent died
    out = tmp_path / "study"
    cmd = [sys.executable, "-m", "gradprobe.cli", "study", str(plan), "--out", str(out), "--workers", "1",
           "--no-probe"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    s0, s1 = run_dir(out, "grpo", 0), run_dir(out, "grpo", 1)
    deadline = time.time() + 240
    # kill once seed 0 is complete and seed 1 is mid-run (it has a checkpoint, no summary)
    def first_checkpoint_only() -> bool:  # seed 1 has an early checkpoint and many updates to go
        try:
            return json.loads((s1 / "checkpoint.json").read_text())["update"] <= 6
        except (OSError, ValueError, KeyError):
            return False

    while not ((s0 / "summary.json").exists() and first_checkpoint_only()
               and not (s1 / "summary.json").exists()):
        assert proc.poll() is None, proc.communicate()
        assert time.time() < deadline, "the study did not reach the kill point in time"
        time.sleep(0.05)
    worker_pid = int((s1 / ".lock").read_text().split()[1])
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert json.loads((s0 / "summary.json").read_text())["completed"]
    assert not (s1 / "summary.json").exists()
    # the orphaned worker notices its parent is gone and exits: nothing writes seed 1 behind our back
    for _ in range(100):
        if not _pid_alive(worker_pid):
            break
        time.sleep(0.05)
    assert not _pid_alive(worker_pid)
    before = {"bytes": (s0 / "metrics.jsonl").read_bytes(), "mtime": (s0 / "metrics.jsonl").stat().st_mtime_ns,
              "summary": (s0 / "summary.json").read_bytes()}
    killed_at = json.loads((s1 / "checkpoint.json").read_text())["update"]

    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "1 of 2 runs already complete; not redone" in done.stderr
    assert (s0 / "metrics.jsonl").read_bytes() == before["bytes"]
    assert (s0 / "metrics.jsonl").stat().st_mtime_ns == before["mtime"]
    assert (s0 / "summary.json").read_bytes() == before["summary"]
    assert f"resuming from checkpoint-{killed_at:06d}" in (s1 / "train.log").read_text()
    study = json.loads((out / "study.json").read_text())
    assert [(r["arm"], r["seed"], r["status"]) for r in study["runs"]] == [("grpo", s, "done") for s in range(2)]
    rows = _csv(out)
    for seed in range(2):
        folder = run_dir(out, "grpo", seed)
        updates = [json.loads(x)["update"] for x in (folder / "metrics.jsonl").read_text().splitlines()
                   if '"eval": true' not in x]
        assert updates == list(range(1, len(updates) + 1))  # resumed, nothing repeated or lost
        mine = [int(r["update"]) for r in rows if r["seed"] == str(seed)]
        assert mine == [e["update"] for e in _evals(folder)] and len(set(mine)) == len(mine)
    assert Counter(r["seed"] for r in rows) == Counter({str(s): len(_evals(run_dir(out, "grpo", s))) for s in range(2)})
    analysis = json.loads((out / "analysis.json").read_text())
    assert analysis["plan_sha256"] == study["plan_sha256"] and analysis["arms"]["grpo"]["seeds"] == 2
    assert "at matched tokens" in done.stdout


def _wait_for(proc, ready, what: str, timeout: float = 900.0) -> None:
    """Poll ``ready()`` until it holds. Fails when ``proc`` exits first; the timeout is only a backstop
    against a hang (a loaded machine is slow, not wrong), never a performance requirement."""
    deadline = time.monotonic() + timeout
    while not ready():
        if proc.poll() is not None:
            pytest.fail(f"the process exited with {proc.returncode} before {what}")
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            pytest.fail(f"no {what} after {timeout:.0f} s")
        time.sleep(0.1)


def _updates_done(folder: Path) -> int:
    try:
        return sum(1 for x in (folder / "metrics.jsonl").read_text().splitlines() if x and '"eval": true' not in x)
    except OSError:
        return 0


def test_ctrl_c_stops_the_study_at_once_says_how_to_resume_and_exits_130(tmp_path):
    """SIGINT to the study's whole process group, as a terminal's Ctrl-C sends it, mid-way through run 1 of 3
    (one worker): no traceback, no further run started, the worker stopped, the lock released, exit 130."""
    import fcntl

    plan = _plan(tmp_path, TOY.replace("generated_tokens = 700", "generated_tokens = 1000000"))  # runs never end
    out = tmp_path / "study"
    cmd = [sys.executable, "-m", "gradprobe.cli", "study", str(plan), "--out", str(out), "--workers", "1",
           "--no-probe"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    s0 = run_dir(out, "grpo", 0)
    with open(tmp_path / "stderr.txt", "w") as err, open(tmp_path / "stdout.txt", "w") as std:
        # a terminal's foreground job: SIGINT at its default even where this test runs as a background job
        # of a non-interactive shell (POSIX: such jobs start with SIGINT ignored, and Python then installs no
        # KeyboardInterrupt handler)
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=std, stderr=err, start_new_session=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        try:
            _wait_for(proc, lambda: _updates_done(s0) >= 1, "the first update of seed 0")
            worker_pid = int((s0 / ".lock").read_text().split()[1])
            assert _pid_alive(worker_pid) and worker_pid != proc.pid
            os.killpg(proc.pid, signal.SIGINT)  # the study process and its worker, like Ctrl-C at a terminal
            rc = proc.wait(timeout=600)  # backstop only: it returns within STOP_GRACE_SECONDS of the signal
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    stderr = (tmp_path / "stderr.txt").read_text()
    stdout = (tmp_path / "stdout.txt").read_text()
    assert rc == 130, stderr
    assert "Traceback" not in stderr + stdout and "KeyboardInterrupt" not in stderr + stdout
    assert "leaked semaphore" not in stderr  # the pool was shut down, not abandoned
    assert ("interrupted: starting no further run; stopping 1 worker process(es) (1 of them running a run or the "
            "probe)") in stderr
    assert f"study {out} interrupted: 0 of 3 runs complete (kept, never redone); no further run was started" in stderr
    assert f"Resume with: gradprobe study {plan} --out {out} --workers 1 --no-probe" in stderr
    assert not _pid_alive(worker_pid)  # told to stop and waited for: nothing writes behind the user's back
    assert not run_dir(out, "grpo", 1).exists() and not run_dir(out, "grpo", 2).exists()  # never started
    assert not (s0 / "summary.json").exists() and _updates_done(s0) >= 1
    lock = out / ".study.lock"
    assert lock.read_text() == ""  # no stale pid
    with open(lock, "a+") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # released: a resume can take it
    study = json.loads((out / "study.json").read_text())
    assert study["interrupted"] and study["wall_seconds"] > 0 and not study.get("finished")
    assert [(r["seed"], r["status"]) for r in study["runs"]] == [(0, "pending"), (1, "pending"), (2, "pending")]


def test_ray_executor_runs_every_run(tmp_path):
    import ray

    plan = _plan(tmp_path, TOY.replace("seeds = [0, 1, 2]", "seeds = [0, 1]").replace(
        "generated_tokens = 700", "generated_tokens = 300"))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        res = run_study(plan, tmp_path / "study", executor="ray", workers=2, probe=False)
    finally:
        ray.shutdown()
    assert res.ok, res.summary()
    assert sorted(res.done) == [("grpo", 0), ("grpo", 1)]
    rows = _csv(tmp_path / "study")
    assert {r["seed"] for r in rows} == {"0", "1"} and all(r["reward"] == "outcome" for r in rows)
    for seed in (0, 1):
        assert json.loads((run_dir(tmp_path / "study", "grpo", seed) / "summary.json").read_text())["completed"]


def test_nan_run_is_recorded_as_failed_the_others_finish_and_the_exit_is_nonzero(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(REWARDS, "explode_at_2", exploding_reward(2))
    text = TOY.replace("seeds = [0, 1, 2]", "seeds = [0]").replace("generated_tokens = 700", "generated_tokens = 300")
    text += '[arms.boom]\nreward = "explode_at_2"\n'
    plan = _plan(tmp_path, text)
    out = tmp_path / "study"
    code = cli_main(["study", str(plan), "--out", str(out), "--executor", "inline", "--no-probe"])
    captured = capsys.readouterr()
    assert code == 1
    assert "1 failed" in captured.out and "FAILED boom seed 0" in captured.out and "non-finite" in captured.out
    study = json.loads((out / "study.json").read_text())
    runs = {r["arm"]: r for r in study["runs"]}
    assert runs["grpo"]["status"] == "done" and runs["boom"]["status"] == "failed"
    assert "update 2" in runs["boom"]["error"] and runs["boom"]["failed_update"] == 2
    boom = run_dir(out, "boom", 0)
    summary = json.loads((boom / "summary.json").read_text())
    assert summary["stop_reason"] == "non_finite_loss" and _evals(boom)[0]["update"] == 0  # its data is kept
    assert {r["arm"] for r in _csv(out)} == {"grpo"}  # the failed run is not analysed as if complete
    analysis = json.loads((out / "analysis.json").read_text())
    assert analysis["excluded_runs"] == [{"arm": "boom", "seed": 0, "status": "failed", "error": runs["boom"]["error"]}]


def test_probe_of_every_arms_reward_runs_once(tmp_path):
    text = TOY.replace("seeds = [0, 1, 2]", "seeds = [0]").replace("generated_tokens = 700", "generated_tokens = 200")  # about one update
    text += '[arms.grpo_2xlr]\nreward = "outcome"\nlr_scale = 2.0\n[arms.mc_min]\nreward = "mc_min"\n'
    text += "[mc]\ncontinuations = 2\nmax_steps = 2\n"
    plan = _plan(tmp_path, text)
    out = tmp_path / "study"
    small = {"prompts": 2, "group": 2, "heldout_prompts": 2, "heldout_group": 2, "n_bootstrap": 50, "continuations": 3}
    res = run_study(plan, out, executor="inline", probe_overrides=small, analyze=False)
    assert res.ok and res.probe == "done", res.summary()
    probe = json.loads((out / "probe" / "probe.json").read_text())
    assert [r["name"] for r in probe["rewards"]] == ["outcome", "mc_min"]  # one entry per distinct reward
    assert probe["config"]["lr"] == 1e-3 and probe["config"]["prompts"] == 2 and probe["config"]["budget_tokens"] == 200
    assert probe["config"]["mc"]["continuations"] == 3 and probe["config"]["mc"]["max_steps"] == 2  # [mc] + K
    arms = json.loads((out / "probe" / "arms.json").read_text())
    assert {a: (v["reward"], v["lr_scale"]) for a, v in arms.items()} == {
        "grpo": ("outcome", 1.0), "grpo_2xlr": ("outcome", 2.0), "mc_min": ("mc_min", 1.0)}
    mtime = (out / "probe" / "probe.json").stat().st_mtime_ns
    first_wall = json.loads((out / "study.json").read_text())["wall_seconds"]
    assert first_wall == pytest.approx(res.wall_seconds) and res.wall_seconds > 0 and "wall time" in res.summary()
    again = run_study(plan, out, executor="inline", probe_overrides=small, analyze=False)
    assert again.probe == "skipped" and sorted(again.skipped) == sorted(again.done) and len(again.done) == 3
    # a resumed study adds its own wall time to the study's total
    assert again.total_wall_seconds == pytest.approx(first_wall + again.wall_seconds)
    assert json.loads((out / "study.json").read_text())["wall_seconds"] == pytest.approx(again.total_wall_seconds)
    assert (out / "probe" / "probe.json").stat().st_mtime_ns == mtime
    assert run_study(plan, out, executor="inline", probe=False, analyze=False).probe == "off"
    with pytest.raises(PlanError, match="unknown key 'probe.nope'"):
        run_study(plan, tmp_path / "other", executor="inline", probe_overrides={"nope": 1})


# ----------------------------------------------------------------------------- bad input

@pytest.mark.parametrize("edit, message", [
    (("[arms.grpo]", "[arms.grpo]\nlearning_rate = 1"), "unknown key 'arms.grpo.learning_rate'"),
    (('reward = "outcome"', 'reward = "outcomes"'), "mc_value"),  # lists the registered rewards
    (("[model]", "[modle]\nname = 1\n[model]"), "unknown key 'modle'"),
    (("generated_tokens = 700", "generated_tokens = 7"), "smaller than one update"),
    (("sampled = false", 'sampled = false\n[[hypotheses]]\nname = "h"\nstatement = "s"\ntest = "paired_bootstrap"\n'
                         'arms = ["nope", "grpo"]'), "no arm 'nope'; valid: grpo, initial"),
])
def test_a_bad_plan_fails_before_anything_is_written(tmp_path, capsys, edit, message):
    plan = _plan(tmp_path, TOY.replace(*edit))
    out = tmp_path / "study"
    assert cli_main(["study", str(plan), "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_a_changed_plan_is_refused_with_both_hashes(tmp_path):
    plan = _plan(tmp_path)
    out = tmp_path / "study"
    frozen, study = freeze_plan(plan, out)
    assert (out / "plan.toml").read_bytes() == plan.read_bytes() and study["plan_sha256"] == frozen.sha256
    plan.write_text(TOY + "# a comment changes the sha256 too\n")
    new = _plan(tmp_path, plan.read_text(), "plan2.toml")
    with pytest.raises(PlanChangedError) as e:
        run_study(new, out, executor="inline")
    import hashlib

    msg = str(e.value)
    assert frozen.sha256 in msg and hashlib.sha256(new.read_bytes()).hexdigest() in msg and "new --out" in msg
    assert not (out / "runs").exists()
    # the frozen copy itself can be given back as the plan
    assert freeze_plan(out / "plan.toml", out)[0].sha256 == frozen.sha256


def test_unwritable_or_full_output_folder(tmp_path, monkeypatch, capsys):
    plan = _plan(tmp_path)
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    assert cli_main(["study", str(plan), "--out", str(blocker / "study")]) == 2
    err = capsys.readouterr().err
    assert str(blocker) in err and "is a file" in err and "choose another --out" in err

    real = freeze.write_json_atomic

    def full(path, data):
        raise output_error("writing", path, OSError(errno.ENOSPC, "No space left on device"))

    monkeypatch.setattr(freeze, "write_json_atomic", full)
    out = tmp_path / "study"
    with pytest.raises(OutputDirError, match="free space"):
        run_study(plan, out, executor="inline")
    assert (out / "plan.toml").read_bytes() == plan.read_bytes() and not (out / "runs").exists()
    monkeypatch.setattr(freeze, "write_json_atomic", real)  # space freed: the study starts where it stopped
    frozen, study = freeze_plan(plan, out)
    assert study["plan_sha256"] == frozen.sha256 and len(study["runs"]) == 3


def test_a_second_study_process_on_the_same_folder_is_refused(tmp_path):
    plan = _plan(tmp_path)
    out = tmp_path / "study"
    freeze_plan(plan, out)
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, sys, time; f = open(sys.argv[1], 'a+'); fcntl.flock(f, fcntl.LOCK_EX); f.write('pid 1'); "
        "f.flush(); print('locked', flush=True); time.sleep(60)"), str(out / ".study.lock")], stdout=subprocess.PIPE,
        text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(StudyError, match="in use by another process"):
            run_study(plan, out, executor="inline")
    finally:
        holder.kill()
        holder.wait()
    with pytest.raises(ValueError, match="executor 'slurm'"):
        run_study(plan, out, executor="slurm")
