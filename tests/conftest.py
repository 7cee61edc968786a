"""Shared fixtures. Test helpers stay in tests/; nothing here is imported by the package."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
GSM8K_DIR = SHARED / "data" / "gsm8k"

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def gsm8k_dir() -> Path:
    if not GSM8K_DIR.is_dir():
        raise FileNotFoundError(f"GSM8K test data expected at {GSM8K_DIR} (../shared/data/gsm8k beside the repo)")
    return GSM8K_DIR


@pytest.fixture()
def tiny_policy():
    from gradprobe.models import load_policy

    return load_policy("tiny-qwen2", dtype="float32", seed=0)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
