"""ProbeConfig composed of one dataclass per stage, read by one coercer (issue 15): the nested layout, every
saved flat ``probe.json["config"]`` and the flat keyword settings of ``gradprobe.probe(...)`` give the
same config; the reference and preconditioner vocabularies come from their registries."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gradprobe.config import (PRECONDITIONER_KINDS, PRECONDITIONERS, REFERENCE_KINDS, REFERENCES, MCConfig,
                              SamplingConfig, reference_kind)
from gradprobe.probe.run import ProbeConfig
from gradprobe.probe_settings import SETTINGS, BatchSettings, ReferenceSettings, setting_names

REPO = Path(__file__).resolve().parents[2]
SHIPPED = sorted(REPO.glob("data/**/probe.json"))


def test_flat_nested_and_objects_give_the_same_config():
    flat = ProbeConfig.from_dict({"prompts": 4, "group": 2, "seed": 3, "precondition": "none", "lr": 1e-3,
                                  "loss_types": "dapo,gspo", "max_new_tokens": 9, "continuations": 5,
                                  "rewards": "outcome, mc_value", "budget_seconds": 60.0, "threads": 2})
    nested = ProbeConfig.from_dict({"batch": {"prompts": 4, "group": 2, "seed": 3},
                                    "reference": {"precondition": "none"},
                                    "update": {"lr": 1e-3, "loss_types": ["dapo", "gspo"]},
                                    "sampling": {"max_new_tokens": 9}, "mc": {"continuations": 5},
                                    "rewards": ["outcome", "mc_value"], "budget": {"seconds": 60.0},
                                    "model": {"threads": 2}})
    objects = ProbeConfig.from_dict({"batch": BatchSettings(prompts=4, group=2, seed=3), "precondition": "none",
                                     "lr": 1e-3, "loss_types": ("dapo", "gspo"), "continuations": 5,
                                     "sampling": SamplingConfig(max_new_tokens=9), "rewards": ("outcome", "mc_value"),
                                     "budget_seconds": 60.0, "threads": 2})
    assert flat == nested == objects
    assert flat.batch == BatchSettings(prompts=4, group=2, seed=3) and flat.update.loss_types == ("dapo", "gspo")
    assert flat.mc == MCConfig(continuations=5, max_steps=8) and flat.sampling.max_new_tokens == 9
    assert flat.reference.preconditioner is PRECONDITIONER_KINDS["none"] and not flat.reference.preconditioner.second_moment
    assert ProbeConfig.from_dict(flat.to_nested()) == flat == ProbeConfig.from_dict(flat.to_dict())
    # a flat setting over a stage object: the flat one wins, the object's other fields stay
    mixed = ProbeConfig.from_dict({"sampling": SamplingConfig(temperature=0.5), "max_new_tokens": 7})
    assert (mixed.sampling.temperature, mixed.sampling.max_new_tokens) == (0.5, 7)


def test_with_settings_changes_only_what_it_names():
    base = ProbeConfig.from_dict({"prompts": 4, "lr": 1e-3, "cosine": True})
    moved = base.with_settings(seed=base.batch.seed + 2, max_new_tokens=5)
    assert moved.batch == BatchSettings(prompts=4, group=8, seed=2) and moved.sampling.max_new_tokens == 5
    assert (moved.update, moved.reference, moved.mc) == (base.update, base.reference, base.mc)
    assert base.batch.seed == 0  # frozen: the original is unchanged


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(REPO)))
def test_every_shipped_probe_json_config_reads_back(path):
    saved = json.loads(path.read_text())["config"]
    config = ProbeConfig.from_dict(saved)  # old files lack later keys (loss_types, threads...): the defaults
    written = config.to_dict()
    for key, value in saved.items():
        if key == "probe_batches":  # a record of the run, not a setting
            continue
        got = {k: written[key][k] for k in value} if isinstance(value, dict) else written[key]
        assert got == value, key


def test_to_dict_is_the_flat_probe_json_layout():
    d = ProbeConfig().to_dict()
    assert list(d) == list(SETTINGS)  # the flat names, in the order probe.json has always had
    assert d["reference"] == "heldout" and d["budget_tokens"] == 250_000 and d["mc"] == {"continuations": 2, "max_steps": 8}
    assert d["rewards"] == ["outcome", "mc_value", "hybrid_0.5"] and d["loss_types"] == []


def test_unknown_and_bad_settings_are_refused_naming_field_and_flag():
    with pytest.raises(ValueError, match=r"unknown probe setting\(s\) promts; valid: .*\bprompts\b.*\bthreads\b"):
        ProbeConfig.from_dict({"promts": 4})
    with pytest.raises(ValueError, match=r"unknown probe setting\(s\) batch\.size; valid in batch: prompts, group, seed"):
        ProbeConfig.from_dict({"batch": {"size": 4}})
    with pytest.raises(ValueError, match=r"group \(--group\) must be >= 2"):
        ProbeConfig.from_dict({"group": 1})
    with pytest.raises(ValueError, match=r"heldout_group \(--heldout-group\) must be >= 2"):
        ProbeConfig.from_dict({"reference": {"heldout_group": 1}})
    with pytest.raises(ValueError, match=r"budget_tokens \(--budget-tokens\) must be >= 1"):
        ProbeConfig.from_dict({"budget_tokens": 0})
    with pytest.raises(ValueError, match=r"reference 'heldin' must be one of \('heldout', 'direction:PATH'\)"):
        ProbeConfig.from_dict({"reference": "heldin"})
    with pytest.raises(ValueError, match=r"precondition 'sgd' must be one of \('adam', 'none'\)"):
        ProbeConfig.from_dict({"precondition": "sgd"})
    with pytest.raises(ValueError, match=r"loss_type \(--loss-type\) 'ppo' is not one of"):
        ProbeConfig.from_dict({"loss_type": "ppo"})
    with pytest.raises(TypeError, match="ProbeConfig.model must be a ModelSettings.*from_dict"):
        ProbeConfig(model="tiny")
    assert "probe_batches" not in setting_names() and ProbeConfig.from_dict({"probe_batches": 3}) == ProbeConfig()


def test_references_and_preconditioners_come_from_the_registries():
    assert REFERENCES == tuple(r.spelling for r in REFERENCE_KINDS.values()) == ("heldout", "direction:PATH")
    assert PRECONDITIONERS == tuple(PRECONDITIONER_KINDS) == ("adam", "none")
    direction = ReferenceSettings(kind="direction:/runs/v.safetensors")
    assert direction.variant is REFERENCE_KINDS["direction"] and direction.variant.path(direction.kind) == "/runs/v.safetensors"
    heldout = reference_kind("heldout")
    assert heldout is REFERENCE_KINDS["heldout"] and not heldout.takes_path and heldout.path("heldout") is None
    assert not REFERENCE_KINDS["heldout"].matches("heldout:x") and not REFERENCE_KINDS["direction"].matches("direction")


def test_the_config_module_loads_no_torch():
    """The command line reads its defaults from the stage classes: they import without torch."""
    code = ("import sys\nfrom gradprobe.probe_settings import BatchSettings, ProbeConfig\n"
            "print(BatchSettings.prompts, ProbeConfig.rewards, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["16", "('outcome',", "'mc_value',", "'hybrid_0.5')", "False"]


def test_float16_on_the_cpu_is_refused_before_any_compute_and_allowed_on_a_gpu():
    """Half precision on the CPU gave non-finite alignments only after the whole probe ran, blamed on a reward."""
    from gradprobe.probe_settings import ProbeConfig

    with pytest.raises(ValueError, match=r"dtype float16 \(--dtype\) on device cpu: .* use float32 \(the default\) "
                                         r"or bfloat16 on the CPU, float16 on a GPU \(--device cuda\)"):
        ProbeConfig.from_dict(dict(model="tiny-qwen2", dtype="float16"))
    for dtype, device in (("bfloat16", "cpu"), ("float32", "cpu"), ("float16", "cuda")):
        c = ProbeConfig.from_dict(dict(model="tiny-qwen2", dtype=dtype, device=device))
        assert (c.model.dtype, c.model.device) == (dtype, device)


@pytest.mark.parametrize("n, ok", [(0, True), (10, True), (1000, True), (1, False), (9, False), (-5, False)])
def test_bootstrap_is_none_or_at_least_ten_resamples(n, ok):
    """--bootstrap 1 printed an interval [x, x] that did not contain the estimate, with SNR inf."""
    from gradprobe.probe_settings import ProbeConfig

    if ok:
        assert ProbeConfig.from_dict(dict(n_bootstrap=n)).run.n_bootstrap == n
    else:
        with pytest.raises(ValueError, match=rf"n_bootstrap \(--bootstrap\) must be 0 "
                                             rf"\(no intervals in the probe table; "
                                             rf"the forecast's come from its own draws\) or at least 10 "
                                             rf"resamples .*, got {n}$"):
            ProbeConfig.from_dict(dict(n_bootstrap=n))


@pytest.mark.parametrize("settings, message", [
    ({"prompts": "4"}, "prompts must be an integer, got '4' (str)"),
    ({"prompts": 4.5}, "prompts must be an integer, got 4.5 (float)"),
    ({"lr": "1e-4"}, "lr must be a number, got '1e-4' (str)"),
    ({"progress": 1}, "progress must be true or false, got 1 (int)"),
    ({"threads": "2"}, "threads must be an integer or None, got '2' (str)"),
    ({"max_new_tokens": "8"}, "max_new_tokens must be an integer, got '8' (str)"),
    ({"batch": {"group": [4]}}, "batch.group must be an integer, got [4] (list)"),
])
def test_a_setting_of_the_wrong_type_is_named_before_any_compute(settings, message):
    """gradprobe.probe("tiny", prompts="4") raised TypeError: '<' not supported between 'str' and 'int'."""
    from gradprobe.probe_settings import ProbeConfig

    with pytest.raises(ValueError) as e:
        ProbeConfig.from_dict(settings)
    assert str(e.value) == message


def test_whole_floats_numpy_numbers_and_paths_are_taken():
    import numpy as np

    from gradprobe.probe_settings import ProbeConfig

    c = ProbeConfig.from_dict({"prompts": 16.0, "group": np.int64(4), "lr": np.float32(0.5), "model": Path("m"),
                               "threads": None, "cosine": np.bool_(True)})
    assert (c.batch.prompts, c.batch.group, c.update.lr, c.model.name, c.model.threads, c.reference.cosine) == (
        16, 4, 0.5, "m", None, True)
    assert type(c.batch.prompts) is int and type(c.batch.group) is int and type(c.update.lr) is float


def test_a_token_budget_may_be_written_as_the_command_line_writes_it():
    """gradprobe.probe(budget_tokens="250k") was refused (``must be an integer``) while --budget-tokens 250k ran."""
    from gradprobe.probe_settings import ProbeConfig

    assert ProbeConfig.from_dict({"budget_tokens": "1.5M"}).budget.tokens == 1_500_000
    assert ProbeConfig.from_dict({"budget": {"tokens": "250k"}}).budget.tokens == 250_000
    assert type(ProbeConfig.from_dict({"budget_tokens": "2.5e5"}).budget.tokens) is int
    with pytest.raises(ValueError) as e:
        ProbeConfig.from_dict({"budget_tokens": "250 k"})
    assert str(e.value) == ("budget_tokens: expected a whole number of tokens: an integer (250000), with a k, M or G "
                            "suffix (250k, 1.5M, 2G) or in scientific notation (2.5e5); got '250 k'")
    with pytest.raises(ValueError, match=r"^budget\.tokens: '1\.5' is 1\.5 tokens, not a whole number"):
        ProbeConfig.from_dict({"budget": {"tokens": "1.5"}})


@pytest.mark.parametrize("seconds", [float("inf"), float("nan"), 0.0, -1.0])
def test_a_seconds_budget_must_be_finite_and_positive(seconds):
    """--budget-seconds inf printed gain@infs +inf."""
    from gradprobe.probe_settings import ProbeConfig

    with pytest.raises(ValueError, match=r"budget_seconds \(--budget-seconds\) must be a finite number of "
                                         r"device-seconds > 0, got"):
        ProbeConfig.from_dict(dict(budget_seconds=seconds))
    assert ProbeConfig.from_dict(dict(budget_seconds=60)).budget.seconds == 60.0


@pytest.mark.parametrize("lr", [float("inf"), float("nan"), 0.0, -1e-4])
def test_lr_must_be_a_finite_number_above_zero(lr):
    """--lr inf was taken and printed a forecast gain of +inf per update with exit status 0."""
    from gradprobe.probe_settings import ProbeConfig

    with pytest.raises(ValueError) as e:
        ProbeConfig.from_dict({"lr": lr})
    assert str(e.value) == f"lr (--lr) must be a finite number > 0, got {lr}"
    assert ProbeConfig.from_dict({"lr": 3e-6}).update.lr == 3e-6


@pytest.mark.parametrize("lr", [1.5, 1e6])
def test_lr_above_the_plans_bound_is_refused(lr):
    """--lr 1e6 was taken and printed a first-order forecast for an update that replaces the policy by noise; a
    plan refuses the same lr (gradprobe.training.plan_checks.check_lr), the probe now does too."""
    from gradprobe.config import MAX_LR
    from gradprobe.probe_settings import ProbeConfig

    with pytest.raises(ValueError, match=r"^lr \(--lr\) must be at most 1 \(an AdamW step .* got " + repr(lr)):
        ProbeConfig.from_dict({"lr": lr})
    assert ProbeConfig.from_dict({"lr": MAX_LR}).update.lr == 1.0
