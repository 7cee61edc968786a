"""Shared fixtures. Test helpers stay in tests/; nothing here is imported by the package."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
#: The GSM8K fixture shipped with the tests (300 train rows, 100 test rows and a file of malformed
#: rows, MIT: tests/data/gsm8k/LICENSE), so that the suite needs nothing outside the repository.
GSM8K_DIR = Path(__file__).resolve().parent / "data" / "gsm8k"

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def gsm8k_dir() -> Path:
    """``tests/data/gsm8k``: ``train.jsonl`` (300 rows), ``test.jsonl`` (100), ``malformed.jsonl``."""
    if not (GSM8K_DIR / "train.jsonl").is_file():
        raise FileNotFoundError(f"GSM8K test fixture expected at {GSM8K_DIR} (tests/data/gsm8k in the repository)")
    return GSM8K_DIR


def load_benchmark(name: str):
    """``benchmarks/<name>.py`` loaded afresh as the module ``name`` (benchmarks/ is no package), each call a new
    module: its top level runs at the call, after the caller's monkeypatches. Test files import it by name
    (``from conftest import load_benchmark``: tests/ is on the path); the ``unseen`` fixture uses it.

    Raises FileNotFoundError naming the path when there is no such script."""
    path = REPO / "benchmarks" / f"{name}.py"
    if not path.is_file():
        raise FileNotFoundError(f"benchmark script {path} not found; name one of benchmarks/*.py without .py")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def unseen():
    """``benchmarks/unseen_study.py`` loaded as a module (:func:`load_benchmark`), once per test module."""
    return load_benchmark("unseen_study")


@pytest.fixture()
def tiny_policy():
    from gradprobe.models import load_policy

    return load_policy("tiny-qwen2", dtype="float32", seed=0)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture()
def no_compute(monkeypatch):
    """The probe's compute (:func:`gradprobe.probe.batches.run_probe_batches`) records its call and refuses to run:
    a command refused before any compute leaves the list empty. (Some test files keep a variant of their own.)"""
    import gradprobe.probe.batches

    calls = []

    def refuse(*args, **kwargs):
        calls.append("run_probe_batches")
        raise AssertionError("the probe ran")

    monkeypatch.setattr(gradprobe.probe.batches, "run_probe_batches", refuse)
    return calls
