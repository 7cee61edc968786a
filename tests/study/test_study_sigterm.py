"""``gradprobe study`` on SIGTERM to its process group (``kill -- -PGID``, a scheduler's stop): it stops as on
Ctrl-C, says how to resume, records the end in study.json and exits 143, as ``gradprobe train`` does."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gradprobe.study.runner import run_dir

from study_helpers import toy_plan, write_plan

REPO = Path(__file__).resolve().parents[2]


def _updates_done(folder: Path) -> int:
    try:
        return sum(1 for x in (folder / "metrics.jsonl").read_text().splitlines() if x and '"eval": true' not in x)
    except OSError:
        return 0


def _wait_for(proc, ready, what: str, timeout: float = 900.0) -> None:
    deadline = time.monotonic() + timeout  # a backstop against a hang only
    while not ready():
        if proc.poll() is not None:
            pytest.fail(f"the process exited with {proc.returncode} before {what}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} after {timeout:.0f} s")
        time.sleep(0.1)


def test_sigterm_stops_the_study_says_how_to_resume_records_the_end_and_exits_143(tmp_path):
    plan = write_plan(tmp_path, toy_plan("toy", seeds=(0, 1), generated_tokens=1_000_000, checkpoint_every=2))
    out = tmp_path / "study"
    cmd = [sys.executable, "-m", "gradprobe.cli", "study", str(plan), "--out", str(out), "--workers", "1",
           "--no-probe"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    s0 = run_dir(out, "grpo", 0)
    with open(tmp_path / "stderr.txt", "w") as err, open(tmp_path / "stdout.txt", "w") as std:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=std, stderr=err, start_new_session=True)
        try:
            _wait_for(proc, lambda: _updates_done(s0) >= 1, "the first update of seed 0")
            os.killpg(proc.pid, signal.SIGTERM)  # the study process and its worker
            rc = proc.wait(timeout=600)  # backstop only
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    stderr = (tmp_path / "stderr.txt").read_text()
    assert rc == 143, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    assert (f"gradprobe study: terminated (SIGTERM): study {out} interrupted: 0 of 2 runs complete (kept, never "
            "redone); no further run was started") in stderr
    assert f"Resume with: gradprobe study {plan} --out {out} --workers 1 --no-probe" in stderr
    assert not run_dir(out, "grpo", 1).exists()  # never started
    study = json.loads((out / "study.json").read_text())
    assert study["interrupted"] and study["wall_seconds"] > 0 and not study.get("finished")
    assert [i["ended"] for i in study["invocations"]] == ["terminated (SIGTERM)"]
    with open(out / ".study.lock", "a+") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # released: a resume can take it
