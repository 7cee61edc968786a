"""The vllm backend where vLLM is not installed fails before the task and the model are loaded (it failed after
the model had loaded, at the first rollout), with the install command and ``--backend hf`` named."""

from __future__ import annotations

from pathlib import Path

import pytest

import gradprobe.probe.run as probe_run
import gradprobe.training.run as training_run
from gradprobe.cli import main
from gradprobe.rollout import check_backend
from gradprobe.config import VLLM_FIX
from gradprobe.rollout.vllm_engine import VLLMUnavailableError

ROOT = Path(__file__).resolve().parents[2]


def _no_vllm(monkeypatch):
    monkeypatch.setattr("gradprobe.config.vllm_installed", lambda: False)

    def never(*a, **k):
        raise AssertionError("the model was loaded before the backend was checked")

    monkeypatch.setattr(probe_run, "load_policy", never)
    monkeypatch.setattr(probe_run, "load_task", never)
    monkeypatch.setattr(training_run, "load_run_policy", never)


def test_check_backend(monkeypatch):
    for name in ("hf", "hf_paged"):
        assert check_backend(name) is None
    with pytest.raises(ValueError, match=r"unknown sampler backend 'sglang'; choose one of "
                                         r"\['hf', 'hf_paged', 'vllm'\]"):
        check_backend("sglang")
    _no_vllm(monkeypatch)
    with pytest.raises(VLLMUnavailableError) as e:
        check_backend("vllm")
    assert isinstance(e.value, RuntimeError)
    assert str(e.value) == f"the vllm backend needs vLLM, which is not installed here; {VLLM_FIX}"
    # the fix names the checkout's install and, for train and study (which have no --backend), the plan's key
    assert '`pip install -e ".[vllm]"` in a checkout' in VLLM_FIX and "`gradprobe probe --backend hf`" in VLLM_FIX
    assert 'for train and study, the plan\'s `[sampling] backend = "hf"`' in VLLM_FIX
    monkeypatch.setattr("gradprobe.config.vllm_installed", lambda: True)
    assert check_backend("vllm") is None


def test_probe_with_vllm_missing_fails_before_loading_anything(tmp_path, monkeypatch, capsys):
    _no_vllm(monkeypatch)
    out = tmp_path / "p"
    assert main(["probe", "--backend", "vllm", "--no-progress", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("gradprobe probe: error: the vllm backend needs vLLM")
    assert not out.exists()


def test_train_with_vllm_missing_fails_before_loading_the_model(tmp_path, monkeypatch, capsys):
    _no_vllm(monkeypatch)
    plan = (ROOT / "plans" / "tiny.toml").read_text()
    assert "\n[sampling]\n" in plan
    (tmp_path / "vllm.toml").write_text(plan.replace("\n[sampling]\n", '\n[sampling]\nbackend = "vllm"\n', 1))
    out = tmp_path / "run"
    rc = main(["train", "--plan", str(tmp_path / "vllm.toml"), "--arm", "grpo", "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert "the vllm backend needs vLLM" in err.splitlines()[-1]
    assert not (out / "metrics.jsonl").exists()


def _vllm_plan(tmp_path) -> Path:
    plan = (ROOT / "plans" / "tiny.toml").read_text()
    (tmp_path / "vllm.toml").write_text(plan.replace("\n[sampling]\n", '\n[sampling]\nbackend = "vllm"\n', 1))
    return tmp_path / "vllm.toml"


def test_study_with_vllm_missing_is_refused_before_the_plan_is_frozen(tmp_path, monkeypatch, capsys):
    """It wrote a 46-file study folder, printed the message 21 times (20 runs and the probe) and exited 1."""
    _no_vllm(monkeypatch)
    out = tmp_path / "st"
    rc = main(["study", str(_vllm_plan(tmp_path)), "--out", str(out), "--executor", "inline", "--quiet"])
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert len(err.splitlines()) == 1 and "the vllm backend needs vLLM, which is not installed here" in err
    assert not out.exists()

