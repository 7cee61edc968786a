import pytest

from gradprobe.ledger import CATEGORIES, Ledger, forward_flops_per_token


def test_totals_add_up_and_eval_is_not_charged():
    led = Ledger()
    led.add_generated("rollout", 100)
    led.add_generated("continuation", 900)
    led.add_generated("eval", 50)
    led.add_generated("selection", 10)
    assert led.charged_tokens == 1010 and led.total_generated == 1060
    assert led.share("continuation") == pytest.approx(900 / 1010)
    other = Ledger()
    other.add_generated("rollout", 5)
    other.trained_tokens = 7
    other.add_seconds("generation", 1.5)
    merged = led.merge(other)
    assert merged.generated_tokens["rollout"] == 105 and merged.trained_tokens == 7
    assert merged.training_seconds == pytest.approx(1.5)
    assert Ledger.from_dict(merged.to_dict()).to_dict() == merged.to_dict()
    assert set(merged.to_dict()["generated_tokens"]) == set(CATEGORIES)


def test_bad_category_and_negative_counts():
    led = Ledger()
    with pytest.raises(ValueError, match="rollout"):
        led.add_generated("rollouts", 1)
    with pytest.raises(ValueError, match="negative"):
        led.add_generated("rollout", -1)


def test_timed_accumulates():
    led = Ledger()
    with led.timed("training"):
        pass
    with led.timed("training"):
        pass
    assert led.device_seconds["training"] >= 0 and led.training_seconds == led.device_seconds["training"]


def test_flops_per_token_formula(tiny_policy):
    m = tiny_policy.model
    cfg = m.config
    from gradprobe.ledger import non_embedding_parameters

    n = non_embedding_parameters(m)
    expected = 2 * n + 2 * cfg.hidden_size * cfg.vocab_size + 2 * cfg.num_hidden_layers * 10 * cfg.hidden_size
    assert forward_flops_per_token(m, 10) == pytest.approx(expected)
