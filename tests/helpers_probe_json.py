"""Shared pieces of the probe.json re-save tests (tests/forecast/test_probe_json_*resave*.py): every float of a
parsed probe.json mapped by one rule, the two shipped single-batch probes pooled as ``--probe-batches 2`` writes
them, and the one-line refusal of :func:`gradprobe.forecast.probe_input.probe_batches_of`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def map_floats(value, rule):
    """``value`` (parsed JSON) with every float ``x`` replaced by ``rule(x)``; other values kept."""
    if isinstance(value, float):
        return rule(value)
    if isinstance(value, list):
        return [map_floats(v, rule) for v in value]
    if isinstance(value, dict):
        return {k: map_floats(v, rule) for k, v in value.items()}
    return value


def pooled_shipped() -> dict:
    """Two shipped single-batch probes on different batches pooled by combine_batches, as the probe writes it."""
    from gradprobe.probe.batches import combine_batches
    from gradprobe.probe.run import ProbeConfig

    a, b = (json.loads((ROOT / "data" / s / "probe" / "probe.json").read_text())
            for s in ("study_tiny_heldout4k", "study_tiny_hard_heldout4k"))
    return json.loads(json.dumps(combine_batches([a, b], ProbeConfig.from_dict(a["config"]))))


def refusal(raw: dict, source=None) -> str:
    """The message with which :func:`gradprobe.forecast.probe_input.probe_batches_of` refuses ``raw``."""
    from gradprobe.forecast.probe_input import probe_batches_of

    with pytest.raises(ValueError) as info:
        probe_batches_of(raw, source=source)
    return str(info.value)
