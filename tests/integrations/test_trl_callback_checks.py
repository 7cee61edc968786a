"""``GradprobeCallback`` refuses a bad task, reward or probe option when it is constructed, and a bad trainer at
``attach``: a trial user's unknown task ``'nope'`` (or reward ``'outcom'``) was accepted until the first probe step,
which aborted training after ``probe_every`` real steps."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from plugin_helpers import plugin_module

from gradprobe.integrations.trl import GradprobeCallback
from gradprobe.rewards import UnknownRewardError, get_reward
from gradprobe.tasks import Task, TaskConfigError, TaskNotFoundError, load_task


def _message(call) -> str:
    """The message ``call()`` raises with (what the probe itself says, without the callback's opening)."""
    try:
        call()
    except Exception as e:  # noqa: BLE001 - any refusal; its text is compared
        return str(e)
    raise AssertionError("no refusal")


def test_an_unknown_task_is_refused_at_construction():
    with pytest.raises(TaskNotFoundError) as info:
        GradprobeCallback(task="nope", probe_every=3, rewards=("outcome",))
    assert str(info.value) == f"GradprobeCallback(task='nope'): {_message(lambda: load_task('nope'))}"
    assert str(info.value).startswith("GradprobeCallback(task='nope'): unknown task 'nope'. Valid: \"gsm8k\"")


def test_a_bad_task_option_and_a_missing_file_are_refused_at_construction(tmp_path):
    with pytest.raises(TaskConfigError) as info:
        GradprobeCallback(task="chain_sum:bogus=1", probe_every=3)
    assert str(info.value) == ("GradprobeCallback(task='chain_sum:bogus=1'): unknown config key 'bogus' for "
                               "reasoning-gym dataset 'chain_sum'; valid keys: min_terms, max_terms, min_digits, "
                               "max_digits, allow_negation")
    missing = tmp_path / "none.jsonl"
    with pytest.raises(FileNotFoundError, match=r"^GradprobeCallback\(task='gsm8k:.*none\.jsonl'\): GSM8K source "):
        GradprobeCallback(task=f"gsm8k:{missing}", probe_every=3)


def test_a_task_that_is_neither_a_spec_nor_a_task_is_refused():
    with pytest.raises(TypeError) as info:
        GradprobeCallback(task=5, probe_every=3)
    assert str(info.value) == ("GradprobeCallback(task=5): task must be a task spec (a str, e.g. 'gsm8k' or "
                               "'jsonl:data.jsonl') or a gradprobe.tasks.Task, got int")


def test_an_unknown_reward_is_refused_at_construction():
    with pytest.raises(UnknownRewardError) as info:
        GradprobeCallback(task="chain_sum", probe_every=3, rewards=("outcom",))
    assert str(info.value) == f"GradprobeCallback(rewards=('outcom',)): {_message(lambda: get_reward('outcom'))}"
    assert "unknown reward 'outcom'; valid: " in str(info.value)


def test_a_plugin_reward_is_resolved_at_construction(tmp_path, monkeypatch):
    source = "def score(completions, **kw):\n    return [0.0 for _ in completions]\n"
    with plugin_module(tmp_path, monkeypatch, "cb_checks_reward", source):
        GradprobeCallback(task="chain_sum", probe_every=3, rewards=("outcome", "cb_checks_reward:score"))
        with pytest.raises(UnknownRewardError) as info:
            GradprobeCallback(task="chain_sum", probe_every=3, rewards=("outcome", "absent.py:score"))
    assert str(info.value).startswith("GradprobeCallback(rewards=('outcome', 'absent.py:score')): reward "
                                      "'absent.py:score': no file absent.py")


def test_a_reward_named_twice_or_no_reward_is_refused():
    with pytest.raises(ValueError) as info:
        GradprobeCallback(task="chain_sum", probe_every=3, rewards=("outcome", "outcome"))
    assert str(info.value) == ("GradprobeCallback(rewards=('outcome', 'outcome')): reward(s) given more than once: "
                               "outcome")
    with pytest.raises(ValueError) as info:
        GradprobeCallback(task="chain_sum", probe_every=3, rewards=())
    assert str(info.value) == ("GradprobeCallback(rewards=()): no rewards to probe: pass --rewards, e.g. "
                               "outcome,mc_value")
    GradprobeCallback(task="chain_sum", probe_every=3, rewards=(), trainer_rewards=True)  # the trainer's own come later


@pytest.mark.parametrize("options, message", [
    ({"prompts": 0}, "prompts (--prompts) must be >= 1, got 0"),
    ({"heldout_group": 1}, "heldout_group (--heldout-group) must be >= 2 (RLOO baseline), got 1"),
    ({"precondition": "adamw"}, "precondition 'adamw' must be one of ('adam', 'none')"),
    ({"micro_batch_size": 0}, "micro_batch_size (--micro-batch-size) must be >= 1, got 0"),
])
def test_a_bad_probe_option_is_refused_at_construction(options, message):
    with pytest.raises(ValueError) as info:
        GradprobeCallback(task="chain_sum", probe_every=3, **options)
    assert str(info.value) == f"GradprobeCallback(probe settings): {message}"


def test_an_unknown_probe_option_is_refused_with_the_valid_ones():
    with pytest.raises(ValueError) as info:
        GradprobeCallback(task="chain_sum", probe_every=3, n_bootstrapp=50)
    assert str(info.value).startswith("GradprobeCallback(probe settings): unknown probe setting(s) n_bootstrapp; "
                                      "valid: ")
    assert "n_bootstrap" in str(info.value).split("valid: ")[1].split(", ")


def test_good_arguments_load_the_task_once_and_a_ledger_only_callback_checks_nothing():
    cb = GradprobeCallback(task="chain_sum", probe_every=3, rewards=("outcome", "mc_value"), n_bootstrap=50,
                           precondition="none", dtype="float16")  # float16: the trainer's device is read at attach
    assert isinstance(cb._task_obj, Task) and cb._task_obj.name == "chain_sum"
    given = load_task("chain_sum")
    assert GradprobeCallback(task=given, probe_every=3)._task_obj is given
    assert GradprobeCallback(task="nope", probe_every=0, rewards=("outcom",))._task_obj is None  # never probes


@pytest.mark.parametrize("trainer, shown", [(None, "None"), (SimpleNamespace(), "SimpleNamespace")])
def test_attach_refuses_what_is_no_trainer(trainer, shown):
    cb = GradprobeCallback(task="chain_sum", probe_every=3)
    with pytest.raises(TypeError) as info:
        cb.attach(trainer)
    assert str(info.value) == (f"GradprobeCallback.attach(trainer): trainer must be a trl GRPOTrainer (the trainer "
                               f"whose run is probed), got {shown}; build the trainer first, then "
                               "callback.attach(trainer)")
    assert cb.trainer is None


def _trainer(loss_type: str) -> SimpleNamespace:
    """A stand-in with what ``attach`` reads first (the loss type is refused before the model is read)."""
    return SimpleNamespace(args=SimpleNamespace(loss_type=loss_type), callback_handler=SimpleNamespace(callbacks=[]),
                           add_callback=lambda cb: None, reward_funcs=[], model=None, accelerator=None)


def test_attach_refuses_a_loss_type_the_probe_cannot_predict():
    cb = GradprobeCallback(task="chain_sum", probe_every=3)
    with pytest.raises(ValueError) as info:
        cb.attach(_trainer("sapo"))
    assert str(info.value) == ("GradprobeCallback.attach(trainer): the trainer's settings: the trainer's loss_type "
                               "'sapo' has no probe equivalent (supported: grpo, dapo, dr_grpo, bnpo, cispo)")
    assert cb.trainer is None
    ledger_only = GradprobeCallback()
    trainer = _trainer("sapo")
    assert ledger_only.attach(trainer) is ledger_only and ledger_only.trainer is trainer  # no probe: not checked


def test_rewards_as_one_string_are_names_joined_by_commas_and_probe_every_takes_numpy_integers():
    import numpy as np

    cb = GradprobeCallback(task="chain_sum", probe_every=np.int64(5), rewards="outcome, mc_value")
    assert cb.rewards == ("outcome", "mc_value") and cb.probe_every == 5 and type(cb.probe_every) is int
    assert GradprobeCallback(task="chain_sum", probe_every=2, rewards="outcome").rewards == ("outcome",)


@pytest.mark.parametrize("every", [True, 2.0, "5", -1])
def test_probe_every_that_is_no_whole_number_is_refused(every):
    with pytest.raises(ValueError, match=rf"^probe_every must be an int >= 0 \(0 = ledger only\), got {every!r}$"):
        GradprobeCallback(task="chain_sum", probe_every=every)
