"""Independent random streams (gradprobe.streams) and the probe's independence of other rewards."""

from __future__ import annotations


import pytest

from gradprobe.streams import EVAL_OFFSET, stream_sampler, stream_seed

from helpers_rollout import one_thread
from helpers_tasks import ScoredTask

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)


def test_stream_seeds_keep_the_historical_rollout_and_eval_seeds():
    assert stream_seed(7, "rollout") == 7
    assert stream_seed(7, "eval") == EVAL_OFFSET + 7


def test_stream_seeds_differ_between_names_and_seeds_and_are_stable():
    names = ["continuation", "reference", "selection", "custom"]
    seeds = {(s, n): stream_seed(s, n) for s in range(4) for n in names}
    assert len(set(seeds.values())) == len(seeds)
    assert all(0 <= v < 2 ** 63 for v in seeds.values())
    assert stream_seed(3, "continuation") == stream_seed(3, "continuation")


@pytest.mark.parametrize("seed, name", [(-1, "rollout"), (0, "")])
def test_stream_seed_refuses_bad_input(seed, name):
    with pytest.raises(ValueError):
        stream_seed(seed, name)


def test_stream_sampler_forks_a_backend_that_can_and_shares_one_that_cannot(tiny_policy):
    from gradprobe.rollout import HFSampler

    base = HFSampler(tiny_policy, seed=3, progress=False)
    fork = stream_sampler(base, 3, "continuation")
    assert isinstance(fork, HFSampler) and fork is not base and fork.seed == stream_seed(3, "continuation")
    assert fork.policy is base.policy and fork.calls == 0

    class Plain:
        pass

    plain = Plain()
    assert stream_sampler(plain, 3, "continuation") is plain


def test_a_rewards_probe_figures_do_not_depend_on_which_other_rewards_are_probed():
    """DESIGN.md "Random streams": probing outcome alone or beside mc_value (whose continuations
    draw samples) gives identical rollouts, reference and outcome figures."""
    from gradprobe.config import MCConfig, SamplingConfig
    from gradprobe.probe.run import ProbeConfig, run_probe

    def probe(rewards):
        cfg = ProbeConfig.from_dict(dict(
            model="tiny-qwen2", task="digit3", rewards=rewards, prompts=4, group=4, heldout_prompts=3,
            heldout_group=4, sampling=SamplingConfig(max_new_tokens=24, temperature=1.0),
            mc=MCConfig(continuations=2, max_steps=3), n_bootstrap=200, lr=1e-4, budget_tokens=100_000,
            progress=False, precondition="adam", second_moment_minibatches=2))
        return run_probe(cfg, task=ScoredTask())

    alone, beside = probe(("outcome",)), probe(("outcome", "mc_value"))
    assert beside["ledger"]["generated_tokens"]["continuation"] > 0  # the other reward did draw samples
    a = next(r for r in alone["rewards"] if r["name"] == "outcome")
    b = next(r for r in beside["rewards"] if r["name"] == "outcome")
    assert a["inner_product"] != 0.0
    for key in ("inner_product", "predicted_gain_per_update", "tokens_per_update"):
        assert a[key] == b[key], key
    # the bootstrap sums all rewards in one vectorised pass: equal up to the order of float additions
    assert a["snr"] == pytest.approx(b["snr"], rel=1e-12)
    assert a["interval"] == pytest.approx(b["interval"], rel=1e-12)
    for key in ("heldout_accuracy", "heldout_group_accuracy", "norm", "zero_variance_groups"):
        assert alone["reference"][key] == beside["reference"][key], key
    assert alone["batch"]["mean_reward"] == beside["batch"]["mean_reward"]
