"""pending_probes: the study probes whose probe.json is missing ("" shared first, then guided/<arm>), and
probe_settings / guided_probes always setting ``loss_types`` (a tuple, empty when no extra loss type)."""

from __future__ import annotations

from gradprobe.probe_settings import ProbeConfig
from gradprobe.study.probe_plan import guided_probes, pending_probes, probe_settings
from gradprobe.training.plan import load_plan

from study_helpers import toy_plan, write_plan

ARMS = ('[arms.grpo]\nreward = "outcome"\n'
        '[arms.guided]\nreward = "outcome"\nguidance = {fraction = 0.5, prefix = 0.5}\n'
        '[arms.guided_bnpo]\nreward = "outcome"\nloss_type = "bnpo"\nguidance = {fraction = 0.25, prefix = 1.0}\n')


def _plan(tmp_path, arms=ARMS):
    return load_plan(write_plan(tmp_path, toy_plan("pending", seeds=(0,), arms=arms)))


def test_pending_probes_lists_missing_probe_json_shared_first(tmp_path):
    plan, folder = _plan(tmp_path), tmp_path / "probe"
    assert pending_probes(plan, folder) == ["", "guided/guided", "guided/guided_bnpo"]
    (folder / "guided" / "guided").mkdir(parents=True)
    (folder / "guided" / "guided" / "probe.json").write_text("{}")
    assert pending_probes(plan, folder) == ["", "guided/guided_bnpo"]
    (folder / "probe.json").write_text("{}")
    assert pending_probes(plan, folder) == ["guided/guided_bnpo"]
    (folder / "guided" / "guided_bnpo").mkdir(parents=True)
    (folder / "guided" / "guided_bnpo" / "probe.json").write_text("{}")
    assert pending_probes(plan, folder) == []


def test_pending_probes_without_guided_arms_is_the_shared_probe_only(tmp_path):
    plan = _plan(tmp_path, arms='[arms.grpo]\nreward = "outcome"\n')
    assert pending_probes(plan, tmp_path / "probe") == [""]
    assert guided_probes(plan) == {}


def test_loss_types_always_set_and_cut_per_guided_probe(tmp_path):
    plan = _plan(tmp_path)
    assert probe_settings(plan)["loss_types"] == ("bnpo",)
    guided = guided_probes(plan)
    assert guided["guided/guided"]["settings"]["loss_types"] == ()  # grpo only: an empty tuple, not the base's
    assert guided["guided/guided_bnpo"]["settings"]["loss_types"] == ("bnpo",)
    assert ProbeConfig.from_dict(guided["guided/guided"]["settings"]).update.loss_types == ()


def test_loss_types_string_is_split_even_without_arm_loss_types(tmp_path):
    plan = _plan(tmp_path, arms='[arms.grpo]\nreward = "outcome"\n')
    settings = probe_settings(plan, {"loss_types": "grpo"})  # an override string, e.g. from the command line
    assert settings["loss_types"] == ()  # split, minus the probe's own loss_type: not the string left in place
    assert ProbeConfig.from_dict(settings).update.loss_types == ()
