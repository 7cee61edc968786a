"""``gradprobe probe --trl-config FILE`` with a count of 0 (or below): refused naming the file and the field, before
any compute. A trial user's ``num_generations: 0`` ended in a traceback (``ZeroDivisionError`` inside TRL's
``grpo_config.py``), and ``gradient_accumulation_steps: 0`` or ``per_device_train_batch_size: 0`` in
``update_prompts (--update-prompts) must be >= 1``, a flag they never passed."""

from __future__ import annotations

import pytest

from gradprobe import cli
from gradprobe.integrations import trl_config_file
from gradprobe.integrations.trl_config_file import TrlConfigError, read_trl_config

WHAT = {"num_generations": "completions per prompt, a GRPO group",
        "per_device_train_batch_size": "completions per device per micro-step",
        "gradient_accumulation_steps": "micro-steps per optimizer step",
        "generation_batch_size": "completions per generation batch",
        "steps_per_generation": "micro-steps per generation batch"}
FIX = {"num_generations": "a whole number >= 2 in the file (TRL's default 8)",
       "per_device_train_batch_size": "a whole number >= 1 in the file (TRL's default 8)",
       "gradient_accumulation_steps": "a whole number >= 1 in the file (TRL's default 1)",
       "generation_batch_size": "a whole number >= 1 or null (TRL derives it) in the file",
       "steps_per_generation": "a whole number >= 1 or null (TRL derives it) in the file"}
LEAST = {"num_generations": 2}


@pytest.mark.parametrize("field", list(WHAT))
@pytest.mark.parametrize("value", [0, -4])
def test_a_count_below_one_is_refused_naming_file_and_field_before_compute(tmp_path, capsys, no_compute, field,
                                                                           value):
    path = tmp_path / "grpo.yaml"
    path.write_text(f"{field}: {value}\n")
    out = tmp_path / "probe-out"
    rc = cli.main(["probe", "--trl-config", str(path), "--rewards", "outcome", "--out", str(out)])
    assert rc == 2
    assert capsys.readouterr().err == (
        f"gradprobe probe: error: --trl-config {path}: field {field!r} = {value} ({WHAT[field]}) must be a whole "
        f"number >= {LEAST.get(field, 1)}; set {field} to {FIX[field]}, or remove it\n")
    assert no_compute == [] and not out.exists()


def test_a_count_that_is_no_whole_number_is_refused_and_whole_ones_or_derived_nulls_read(tmp_path):
    path = tmp_path / "grpo.yaml"
    for text, shown in [("num_generations: true\n", "True"), ("gradient_accumulation_steps: 2.5\n", "2.5"),
                        ("per_device_train_batch_size: '8'\n", "'8'")]:
        path.write_text(text)
        with pytest.raises(TrlConfigError, match=rf"grpo\.yaml: field '{text.split(':')[0]}' = {shown} \(.*\) must be "
                                                 r"a whole number >= \d"):
            read_trl_config(path)
    path.write_text("num_generations: 4\nper_device_train_batch_size: 8\ngradient_accumulation_steps: 2\n"
                    "steps_per_generation: null\nmax_completion_length: 16\n")
    _, cfg = read_trl_config(path)
    assert (cfg["generation_batch_size"], cfg["steps_per_generation"]) == (16, 2)


def test_any_exception_of_grpoconfig_is_refused_naming_file_and_field(tmp_path, monkeypatch):
    """TRL raising something other than ValueError/TypeError (a ZeroDivisionError on one field) is a refusal naming
    the field it rejects on its own, not a traceback."""
    real = trl_config_file._grpo_config

    def grpo_config(fields):
        if fields.get("num_generations") == 3:
            return 1 % 0  # as TRL's `generation_batch_size % num_generations` did for 0
        return real(fields)

    monkeypatch.setattr(trl_config_file, "_grpo_config", grpo_config)
    path = tmp_path / "grpo.json"
    path.write_text('{"num_generations": 3, "learning_rate": 1e-5}')
    with pytest.raises(TrlConfigError) as info:
        read_trl_config(path)
    assert str(info.value) == (f"--trl-config {path} (field num_generations): trl.GRPOConfig rejects it: "
                               "ZeroDivisionError: integer modulo by zero; correct num_generations in the file")
