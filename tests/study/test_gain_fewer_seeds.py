"""A gain vs grpo paired over fewer seeds than the arm has (the others not read within the promised eval interval) is
printed with how many it rests on: a trial user's learning-rate study printed ``flops: grpo_0.5xlr -1.56 n/a`` from
one seed of two, while its ranking and sweep said no arm was read on every seed there."""

from gradprobe.study.report import _gains


def _cell(gain, seeds, per_seed, ci=None):
    return {"gain_vs_grpo": gain, "gain_ci": ci, "gain_vs_grpo_ci_two_way": None, "gain_seeds": seeds,
            "per_seed": per_seed}


def test_a_gain_on_fewer_seeds_says_so():
    result = {"control_arm": "grpo", "two_way": True, "arms": {
        "grpo": {"flops": _cell(0.0, 1, {"0": 75.0, "1": None}), "updates": _cell(0.0, 2, {"0": 1.0, "1": 2.0})},
        "grpo_0.5xlr": {"flops": _cell(-1.5625, 1, {"0": 73.44, "1": None}),
                        "updates": _cell(3.125, 2, {"0": 1.0, "1": 2.0}, ci=[-16.73, 22.98])}}}
    assert _gains(result, ["updates", "flops"])[1:] == [
        "  updates: grpo_0.5xlr +3.12 [-16.73, +22.98]",
        "  flops: grpo_0.5xlr -1.56 n/a (on 1 of 2 seeds: those read in both arms)"]
