"""What the TRL callback sends to ``trainer.log`` for a reward without a gradient on the probe batch: a trial user's
trainer reward that returned None for every completion was logged as ``inner_product`` 0.0, ``gain_per_update`` 0.0
and ``snr`` 0.0 (a measured zero on TensorBoard or W&B), while ``probe.json`` said ``no_signal: true``."""

from __future__ import annotations

from gradprobe.integrations.trl import GradprobeCallback


def _figures(result):
    return GradprobeCallback._figures(GradprobeCallback.__new__(GradprobeCallback), result)


def test_a_reward_without_a_gradient_logs_no_signal_not_zeros():
    result = {"rewards": [
        {"name": "outcome", "inner_product": 0.25, "predicted_gain_per_update": 1.5, "tokens_per_update": 512.0,
         "snr": 2.0, "no_signal": False},
        {"name": "bad", "inner_product": 0.0, "predicted_gain_per_update": 0.0, "tokens_per_update": 512.0,
         "snr": 0.0, "no_signal": True}],
        "reference": {"heldout_accuracy": 0.5}}
    assert _figures(result) == {
        "gradprobe/outcome/inner_product": 0.25, "gradprobe/outcome/gain_per_update": 1.5,
        "gradprobe/outcome/tokens_per_update": 512.0, "gradprobe/outcome/snr": 2.0,
        "gradprobe/bad/no_signal": 1.0, "gradprobe/bad/tokens_per_update": 512.0,
        "gradprobe/heldout_accuracy": 0.5}
