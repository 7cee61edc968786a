"""The probe's size settings have upper bounds, refused when the settings are built (before any model loads or any
prompt is drawn), in the style of ``rank-prompts --pool``'s MAX_POOL: ``--prompts`` and ``--heldout-prompts`` at
most MAX_POOL (1,000,000) prompts, ``--group``, ``--heldout-group`` and ``--continuations`` at most MAX_GROUP
(4,096), a batch of at most MAX_COMPLETIONS (10,000,000) completions, and ``--probe-batches`` x ``--prompts`` at
most MAX_POOL distinct training prompts. Before, ``gradprobe probe --prompts 1000000000`` built every prompt in a
list and grew without end, and ``--group 1000000000`` did in the sampler.

Nothing big is allocated here: each refusal comes from the settings' own check.
"""

from __future__ import annotations

import dataclasses

import pytest

from gradprobe.probe_settings import (MAX_COMPLETIONS, MAX_GROUP, MAX_POOL, ProbeConfig, check_batch_seeds,
                                      check_probe_batches)

POOL_WHY = ("every prompt of the batch is built in memory before anything is sampled, and no prompt pool is larger "
            "(a plan's [task] pool and rank-prompts --pool take at most that many, MAX_POOL)")
GROUP_WHY = ("each completion is sampled and held in memory before any gradient, and the limit is 64 times the "
             "largest GRPO group of the published recipes (DeepSeekMath's 64)")


def _refusal(**settings) -> str:
    with pytest.raises(ValueError) as e:
        ProbeConfig.from_dict(settings)
    return str(e.value)


def test_the_limits():
    assert (MAX_POOL, MAX_GROUP, MAX_COMPLETIONS) == (1_000_000, 4096, 10_000_000)


def test_prompts_over_max_pool_is_refused():
    assert _refusal(prompts=1_000_000_000) == (
        f"prompts (--prompts) = 1,000,000,000 is more than 1,000,000 prompts: {POOL_WHY}; give --prompts at most "
        "1,000,000 (16-256 is the usual size)")
    assert ProbeConfig.from_dict({"prompts": MAX_POOL, "group": 2}).batch.prompts == 1_000_000  # the limit itself


def test_heldout_prompts_over_max_pool_is_refused():
    assert _refusal(heldout_prompts=1_000_001) == (
        f"heldout_prompts (--heldout-prompts) = 1,000,001 is more than 1,000,000 prompts: {POOL_WHY}; give "
        "--heldout-prompts at most 1,000,000 (8-64 is the usual size)")


def test_group_over_max_group_is_refused():
    assert _refusal(group=1_000_000_000) == (
        f"group (--group) = 1,000,000,000 is more than 4,096 completions per prompt: {GROUP_WHY}; give --group at "
        "most 4,096 (8-16 is the usual size)")
    assert ProbeConfig.from_dict({"group": 4096}).batch.group == 4096


def test_heldout_group_over_max_group_is_refused():
    assert _refusal(heldout_group=4097) == (
        f"heldout_group (--heldout-group) = 4,097 is more than 4,096 completions per prompt: {GROUP_WHY}; give "
        "--heldout-group at most 4,096 (8-16 is the usual size)")


def test_continuations_over_max_group_is_refused():
    assert _refusal(continuations=5000) == (
        "continuations (--continuations) = 5,000 is more than 4,096 continuations per step boundary: the "
        "continuations of every step boundary of every completion are sampled in one call and held in memory, and "
        "the limit is that of a group (--group), 64 times the largest GRPO group of the published recipes; give "
        "--continuations at most 4,096 (2-8 is the usual number)")
    assert ProbeConfig.from_dict({"continuations": 4096}).mc.continuations == 4096


def test_prompts_times_group_over_max_completions_is_refused():
    assert _refusal(prompts=100_000, group=4096) == (
        "prompts (--prompts) x group (--group) = 100,000 x 4,096 is 409,600,000 completions, more than 10,000,000: "
        "every completion of the batch is sampled in one call and held in memory before any gradient; give fewer "
        "--prompts or a smaller --group (a probe batch is usually 16-256 prompts x 8-16 completions)")
    assert _refusal(heldout_prompts=10_000, heldout_group=2000).startswith(
        "heldout_prompts (--heldout-prompts) x heldout_group (--heldout-group) = 10,000 x 2,000 is 20,000,000 "
        "completions, more than 10,000,000: ")
    assert ProbeConfig.from_dict({"prompts": 10_000, "group": 1000}).batch.prompts == 10_000  # 10,000,000: taken


def test_a_size_of_thousands_of_digits_is_refused_by_its_size():
    assert _refusal(prompts=10**5000).startswith(
        "prompts (--prompts) = an integer of about 5001 digits is more than 1,000,000 prompts: ")


def test_a_plan_probe_table_gets_the_same_limits():
    from gradprobe.study.probe_plan import check_probe_settings
    from gradprobe.training.plan import PlanError, parse_plan

    from study_helpers import toy_plan

    with pytest.raises(PlanError) as e:  # when the plan loads, before a study folder is made
        parse_plan(toy_plan("toylimit") + "[probe]\ngroup = 5000\n")
    assert str(e.value).endswith("probe.group must be in [2, 4096] (group-relative advantages need two completions; "
                                 "GRPO recipes use 8-64), got 5000")
    plan = parse_plan(toy_plan("toylimit"))
    plan = dataclasses.replace(plan, probe=dataclasses.replace(plan.probe, group=5000))  # a Plan built in code
    with pytest.raises(PlanError) as e:
        check_probe_settings(plan)
    assert str(e.value) == (f"[probe]: group (--group) = 5,000 is more than 4,096 completions per prompt: {GROUP_WHY}; "
                            "give --group at most 4,096 (8-16 is the usual size)")


def test_probe_batches_times_prompts_over_max_pool_is_refused():
    with pytest.raises(ValueError) as e:
        check_batch_seeds(0, 1_000_000_000)
    assert str(e.value) == (
        "probe_batches (--probe-batches) = 1,000,000,000 is more than 1,000,000 batches: each batch draws its own "
        "--prompts distinct training prompts, all built in memory before the first batch, as a prompt pool of at "
        "most that many (MAX_POOL); give --probe-batches at most 1,000,000 (1-10 is the usual number; the interval "
        "narrows as 1/sqrt(N))")
    with pytest.raises(ValueError) as e:
        check_batch_seeds(0, 62_501, prompts=16)
    assert str(e.value) == (
        "probe_batches (--probe-batches) x prompts (--prompts) = 62,501 x 16 is 1,000,016 distinct training prompts, "
        "more than 1,000,000: each batch draws its own prompts, all built in memory before the first batch, as a "
        "prompt pool of at most that many (MAX_POOL); give --probe-batches at most 62,500 with these --prompts "
        "(1-10 is the usual number)")
    check_batch_seeds(0, 62_500, prompts=16)  # exactly MAX_POOL prompts: taken
    check_probe_batches(1_000_000)


def test_the_command_refuses_before_any_model_loads(tmp_path, monkeypatch, capsys):
    import gradprobe.models
    from gradprobe.cli import main

    def no_model(*args, **kwargs):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(gradprobe.models, "load_policy", no_model)
    out = tmp_path / "D"
    assert main(["probe", "--prompts", "1000000000", "--out", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"gradprobe probe: error: prompts (--prompts) = 1,000,000,000 is more than 1,000,000 prompts: {POOL_WHY}; "
        "give --prompts at most 1,000,000 (16-256 is the usual size)\n")
    assert main(["probe", "--group", "1000000000", "--out", str(out)]) == 2
    assert capsys.readouterr().err.startswith("gradprobe probe: error: group (--group) = 1,000,000,000 is more than "
                                              "4,096 completions per prompt: ")
    assert not out.exists()


def test_many_batches_of_a_few_prompts_are_refused_before_any_model_loads(tmp_path, monkeypatch, capsys):
    import gradprobe.models
    from gradprobe.cli import main

    def no_model(*args, **kwargs):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(gradprobe.models, "load_policy", no_model)
    out = tmp_path / "D"
    # 100,000 batches pass the batch count's own bound, not batches x prompts (1,600,000 prompts)
    assert main(["probe", "--probe-batches", "100000", "--prompts", "16", "--out", str(out)]) == 2
    assert capsys.readouterr().err.startswith(
        "gradprobe probe: error: probe_batches (--probe-batches) x prompts (--prompts) = 100,000 x 16 is 1,600,000 "
        "distinct training prompts, more than 1,000,000")
    assert not out.exists()
