"""Issue 14: study.json ``wall_seconds`` includes an invocation killed with SIGKILL, up to its last
heartbeat, and ``invocations`` lists every invocation with how it ended. A real study process is
killed; the test polls files with a generous timeout (a loaded machine is slow, not wrong)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gradprobe.study.invocations import HEARTBEAT_JSON
from gradprobe.study.runner import run_dir

from study_helpers import toy_plan

REPO = Path(__file__).resolve().parents[2]

PLAN = toy_plan("killed", seeds=(0, 1), generated_tokens=600, every_tokens=300, checkpoint_every=2)


def _json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def test_the_time_of_a_sigkilled_invocation_counts_in_wall_seconds(tmp_path):
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    out = tmp_path / "study"
    cmd = [sys.executable, "-m", "gradprobe.cli", "study", str(plan), "--out", str(out), "--workers", "1",
           "--no-probe", "--no-analysis"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}

    def seed0_recorded() -> bool:  # study.json (saved right after the run finished) says seed 0 is done
        study = _json(out / "study.json")
        return bool(study) and study["runs"][0]["status"] == "done" and (out / HEARTBEAT_JSON).exists()

    with open(tmp_path / "first.err", "w") as err:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=err)
        try:
            deadline = time.monotonic() + 1800  # backstop against a hang only (a loaded 2-core machine took 9 min)
            while not seed0_recorded():
                if proc.poll() is not None:
                    pytest.fail(f"the study exited with {proc.returncode} first: {(tmp_path / 'first.err').read_text()}")
                assert time.monotonic() < deadline, "seed 0 never finished"
                time.sleep(0.05)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    beat = _json(out / HEARTBEAT_JSON)  # what the killed process left
    at_kill = _json(out / "study.json")
    (entry,) = at_kill["invocations"]
    assert entry["ended"] is None and entry["id"] == beat["id"] and entry["pid"] == proc.pid
    killed_seconds = max(beat["seconds"], entry["seconds"])
    assert killed_seconds >= at_kill["runs"][0]["seconds"] > 0  # at least the finished run's time
    assert not at_kill.get("wall_seconds")  # nothing was counted before the kill

    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr
    assert "ended without recording it (killed)" in done.stderr
    study = _json(out / "study.json")
    first, second = study["invocations"]
    assert (first["id"], first["ended"], first["seconds"]) == (entry["id"], "killed", killed_seconds)
    assert second["ended"] == "normally" and second["pid"] != proc.pid and second["seconds"] > 0
    assert study["wall_seconds"] == pytest.approx(killed_seconds + second["seconds"])
    assert not (out / HEARTBEAT_JSON).exists()  # ended normally: no heartbeat left behind
    assert [r["status"] for r in study["runs"]] == ["done", "done"]
    assert json.loads((run_dir(out, "grpo", 1) / "summary.json").read_text())["completed"]
