"""Extra loss types in one probe run (ProbeConfig.loss_types, ``gradprobe probe --loss-types``).

The estimate of a reward under loss type L from a run whose own loss type is grpo must equal a separate
probe run with ``loss_type = L`` on the same batch (same seed), in float64: the alignment does not depend on
the loss type (with u = v, precondition "none"), only the token weights and gspo's advantages do. The shipped
tiny tier on its frontier task ends completions at different lengths (some truncated), so grpo's per-sequence
mean, the token means of bnpo/cispo and dr_grpo's constant all weigh tokens differently.
"""

from __future__ import annotations

import json

import pytest

from gradprobe.cli import main
from gradprobe.config import MCConfig, SamplingConfig
from gradprobe.probe.run import DEFAULT_TASK, ProbeConfig, format_table, run_probe
from gradprobe.probe_keys import arm_entry, entry_key, split_entry_key

from helpers_tasks import ScoredTask

EXTRA = ("bnpo", "cispo", "dr_grpo", "gspo")
SEPARATE = ("bnpo", "dr_grpo", "gspo")  # cispo has bnpo's weights: asserted equal to bnpo below
#: Every number of an entry that the loss type changes, and those it must not.
NUMBERS = ("inner_product", "predicted_gain_per_update", "predicted_gain_at_budget", "snr", "signal_proxy")
LISTS = ("interval", "gain_interval_per_update", "gain_interval_at_budget", "per_group", "signal_proxy_per_group")


def _config(**kw):
    base = dict(model="tiny", task=DEFAULT_TASK, rewards=("outcome", "mc_advantage"), prompts=4, group=4,
                heldout_prompts=3, heldout_group=4, sampling=SamplingConfig(max_new_tokens=32, temperature=1.0),
                mc=MCConfig(continuations=2, max_steps=2), n_bootstrap=200, lr=1e-4, budget_tokens=100_000,
                progress=False, precondition="none", dtype="float64", seed=3)
    base.update(kw)
    return ProbeConfig.from_dict(base)


@pytest.fixture(scope="module")
def multi(tmp_path_factory):
    out = tmp_path_factory.mktemp("multi")
    return run_probe(_config(loss_types=EXTRA), out=out), out


def _by_name(result) -> dict:
    return {r["name"]: r for r in result["rewards"]}


def _close(a, b, rel=1e-10):
    return a == pytest.approx(b, rel=rel, abs=1e-300)


@pytest.mark.parametrize("loss_type", SEPARATE)
def test_an_extra_loss_type_equals_a_separate_probe_with_that_loss_type(multi, loss_type):
    result, _ = multi
    entries = _by_name(result)
    alone = _by_name(run_probe(_config(loss_type=loss_type)))
    assert list(alone) == ["outcome", "mc_advantage"]
    assert result["batch"]["generated_tokens"] > 0 and 0 < result["batch"]["mean_reward"] < 1
    for reward, sep in alone.items():
        key = f"{reward}@{loss_type}"
        e = entries[key]
        assert e["name"] == key and e["reward"] == reward and e["loss_type"] == loss_type == sep["loss_type"]
        assert e["inner_product"] != 0.0
        for f in NUMBERS:
            assert _close(e[f], sep[f]), (key, f, e[f], sep[f])
        for f in LISTS:
            assert len(e[f]) == len(sep[f]) and all(_close(x, y) for x, y in zip(e[f], sep[f])), (key, f)
        assert e["tokens_per_update"] == sep["tokens_per_update"]
        # the ratio to the reference reward under the same loss type is the separate run's ratio to its outcome
        assert e["same_loss_reference"] == f"outcome@{loss_type}" and sep["same_loss_reference"] == "outcome"
        assert _close(e["same_loss_ratio"], sep["same_loss_ratio"])


def test_loss_types_really_change_the_estimate_and_keys_round_trip_through_probe_json(multi):
    result, out = multi
    saved = json.loads((out / "probe.json").read_text())
    keys = [r["name"] for r in saved["rewards"]]
    assert keys == ["outcome", "mc_advantage"] + [f"{r}@{lt}" for lt in EXTRA for r in ("outcome", "mc_advantage")]
    assert saved["config"]["loss_types"] == list(EXTRA) and saved["config"]["loss_type"] == "grpo"
    for r in saved["rewards"]:
        assert split_entry_key(r["name"], saved["config"]["loss_type"]) == (r["reward"], r["loss_type"])
        assert entry_key(r["reward"], r["loss_type"], "grpo") == r["name"]
    e = _by_name(saved)
    # bnpo and cispo share dapo's token weights; gspo of a per-sequence advantage is grpo (estimate.py docstring)
    assert e["outcome@bnpo"]["inner_product"] == e["outcome@cispo"]["inner_product"]
    assert _close(e["outcome@gspo"]["inner_product"], e["outcome"]["inner_product"], rel=1e-12)
    # ... but not of a token-level advantage, and the token mean weights long completions differently
    assert not _close(e["mc_advantage@gspo"]["inner_product"], e["mc_advantage"]["inner_product"], rel=1e-3)
    assert not _close(e["outcome@bnpo"]["inner_product"], e["outcome"]["inner_product"], rel=1e-3)
    assert e["outcome"]["same_loss_ratio"] == 1.0 and e["outcome@bnpo"]["same_loss_ratio"] == 1.0
    assert _close(e["mc_advantage@bnpo"]["same_loss_ratio"],
                  e["mc_advantage@bnpo"]["inner_product"] / e["outcome@bnpo"]["inner_product"], rel=1e-15)
    table = format_table(saved)
    assert "outcome@dr_grpo" in table and "REWARD@LOSS" in table


def test_bad_loss_types_are_refused_with_the_field_and_the_choices():
    with pytest.raises(ValueError, match=r"loss_types \(--loss-types\) 'ppo'.*bnpo, cispo, dapo, dr_grpo, grpo, gspo"):
        _config(loss_types=("bnpo", "ppo"))
    with pytest.raises(ValueError, match="repeats the probe's own loss_type 'grpo'"):
        _config(loss_types=("grpo",))
    with pytest.raises(ValueError, match="bnpo more than once"):
        _config(loss_types=("bnpo", "bnpo"))
    with pytest.raises(ValueError, match=r"loss_type \(--loss-type\) 'ppo'"):
        _config(loss_type="ppo")
    assert _config(loss_types="bnpo, cispo").update.loss_types == ("bnpo", "cispo")  # a plan's string form


def test_a_reward_name_with_the_separator_is_refused_before_any_output(tmp_path):
    from gradprobe.rewards import get_reward

    with pytest.raises(ValueError, match="must not contain '@'"):
        run_probe(_config(rewards=("outcome",)), out=tmp_path / "o", task=ScoredTask(),
                  extra_rewards={"mine@v2": get_reward("outcome")})
    assert not (tmp_path / "o").exists()


def test_keys_helpers():
    assert entry_key("outcome", "grpo", "grpo") == "outcome" and entry_key("outcome", "bnpo", "grpo") == "outcome@bnpo"
    assert entry_key("outcome", "grpo", "dapo") == "outcome@grpo"
    assert split_entry_key("hybrid_0.5@cispo", "grpo") == ("hybrid_0.5", "cispo")
    assert split_entry_key("hybrid_0.5", "dapo") == ("hybrid_0.5", "dapo")
    for bad in ("@bnpo", "outcome@", "a@b@c"):
        with pytest.raises(ValueError, match="REWARD@LOSS_TYPE"):
            split_entry_key(bad, "grpo")
    assert arm_entry({"reward": "outcome", "probe_entry": "outcome@gspo"}) == "outcome@gspo"
    assert arm_entry({"reward": "outcome", "lr_scale": 2.0}) == "outcome"  # arms.json before loss-type arms


def test_cli_loss_types(tmp_path, capsys):
    common = ["probe", "--model", "tiny-qwen2", "--task", "chain_sum", "--rewards", "outcome", "--prompts", "2",
              "--group", "2", "--heldout-prompts", "2", "--heldout-group", "2", "--max-new-tokens", "8",
              "--bootstrap", "50", "--no-progress"]
    for value, needle in (("bnpo,ppo", "'ppo': not a loss type; choose from bnpo, cispo, dapo, dr_grpo, grpo, gspo"),
                          ("grpo", "repeats the probe's own loss_type 'grpo'")):
        rc = main([*common, "--out", str(tmp_path / "bad"), "--loss-types", value])
        err = capsys.readouterr().err
        assert rc == 2 and "--loss-types" in err and needle in err, err
        assert not (tmp_path / "bad").exists()
    assert main([*common, "--out", str(tmp_path / "o"), "--loss-types", "bnpo, cispo"]) == 0
    printed = capsys.readouterr().out
    assert "outcome@bnpo" in printed and "outcome@cispo" in printed
    saved = json.loads((tmp_path / "o" / "probe.json").read_text())
    assert [r["name"] for r in saved["rewards"]] == ["outcome", "outcome@bnpo", "outcome@cispo"]
    assert saved["config"]["loss_types"] == ["bnpo", "cispo"]


#: Under Adam: one extra loss type per weight family besides the probe's own (grpo: grpo, gspo; dapo: bnpo, cispo;
#: dr_grpo), so the run makes three alignment passes.
ADAM_EXTRA = ("bnpo", "gspo", "dr_grpo", "cispo")


def _adam_config(**kw):
    # 8 prompts: at 4 (seed 3) one group has mixed rewards, and a second moment from one minibatch gives grpo's and
    # bnpo's P the same up to scale, so a shared P would pass the comparison by luck (measured: the shared P then
    # gives outcome@bnpo -216.07, its own P -208.62)
    return _config(precondition="adam", prompts=8, **kw)


@pytest.fixture(scope="module")
def adam_multi(tmp_path_factory):
    """A multi-loss probe under Adam, recording the direction and output of every alignment pass."""
    import gradprobe.probe.direction as probe_pkg  # where the probe looks token_alignment up

    passes = []  # (direction norm, alignment) per token_alignment call

    def counting(model, batch, direction, **kw):
        a = real(model, batch, direction, **kw)
        passes.append((sum(float(x.double().square().sum()) for x in direction.values()) ** 0.5, a.clone()))
        return a

    real = probe_pkg.token_alignment
    out = tmp_path_factory.mktemp("adam_multi")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(probe_pkg, "token_alignment", counting)
        result = run_probe(_adam_config(loss_types=ADAM_EXTRA), out=out)
    return result, out, passes


@pytest.mark.parametrize("loss_type", ("bnpo", "dr_grpo", "gspo"))
def test_under_adam_an_extra_loss_type_equals_a_separate_probe_with_its_own_preconditioner(adam_multi, loss_type):
    # each loss-type arm trains with its own Adam, whose second moment comes from its own loss's gradients
    result, _, _ = adam_multi
    entries = _by_name(result)
    alone = run_probe(_adam_config(loss_type=loss_type))
    assert alone["reference"]["precondition"].startswith("adam (eps")
    for reward, sep in _by_name(alone).items():
        e = entries[f"{reward}@{loss_type}"]
        assert e["inner_product"] != 0.0 and e["loss_type"] == loss_type
        for f in NUMBERS:
            assert _close(e[f], sep[f]), (e["name"], f, e[f], sep[f])
        for f in LISTS:
            assert len(e[f]) == len(sep[f]) and all(_close(x, y) for x, y in zip(e[f], sep[f])), (e["name"], f)
        assert _close(e["same_loss_ratio"], sep["same_loss_ratio"])
    fam = result["reference"]["alignment_families"][entries[f"outcome@{loss_type}"]["alignment_family"]]
    assert fam["precondition"] == alone["reference"]["precondition"]  # the same eps: the same second moment


def test_under_adam_loss_types_with_the_same_token_weights_share_one_pass(adam_multi):
    result, out, passes = adam_multi
    e = _by_name(result)
    # grpo+gspo, bnpo+cispo (dapo's weights) and dr_grpo: three passes, in that order, each on its own direction
    assert len(passes) == 3
    assert len({round(n, 12) for n, _ in passes}) == 3
    families = {k: (v["alignment_family"], v["alignment_pass"]) for k, v in e.items()}
    assert families == {**{r: ("grpo", 0) for r in ("outcome", "mc_advantage")},
                        **{f"{r}@gspo": ("grpo", 0) for r in ("outcome", "mc_advantage")},
                        **{f"{r}@{lt}": ("dapo", 1) for lt in ("bnpo", "cispo") for r in ("outcome", "mc_advantage")},
                        **{f"{r}@dr_grpo": ("dr_grpo", 2) for r in ("outcome", "mc_advantage")}}
    fams = result["reference"]["alignment_families"]
    assert {k: v["loss_types"] for k, v in fams.items()} == {"grpo": ["grpo", "gspo"], "dapo": ["bnpo", "cispo"],
                                                              "dr_grpo": ["dr_grpo"]}
    assert [v["pass"] for v in fams.values()] == [0, 1, 2]
    assert result["reference"]["preconditioner_loss_type"] == "grpo"
    assert e["outcome@bnpo"]["inner_product"] == e["outcome@cispo"]["inner_product"]
    assert _close(e["outcome@gspo"]["inner_product"], e["outcome"]["inner_product"], rel=1e-12)
    # the saved alignment (alignment.safetensors, tokens.jsonl) is the probe's own loss type's pass
    from safetensors.torch import load_file

    saved = load_file(str(out / "alignment.safetensors"))["alignment"]
    assert saved.equal(passes[0][1]) and not saved.equal(passes[1][1])
    costs = json.loads((out / "probe.json").read_text())["costs"]
    assert costs["extra_alignment_passes"] == 2
    assert costs["extra_alignment_pass_seconds"] > 0 and costs["extra_precondition_seconds"] > 0
    assert costs["extra_alignment_pass_seconds"] == pytest.approx(
        sum(v["alignment_seconds"] for v in fams.values() if v["pass"] > 0), rel=1e-12)
    # the ratio is still ONE pass (the probe's own, with its weighted sums) against one update
    assert costs["alignment_to_update_ratio"] == pytest.approx(
        costs["alignment_pass_seconds"] / costs["update_forward_backward_seconds"], rel=1e-12)
    assert costs["alignment_pass_seconds"] < fams["grpo"]["alignment_seconds"] + costs["extra_alignment_pass_seconds"]
    notes = [w for w in result["warnings"] if "own Adam preconditioner and alignment pass" in w]
    assert len(notes) == 1 and "dapo (bnpo, cispo)" in notes[0] and "dr_grpo (dr_grpo)" in notes[0]
    assert not any("not their own" in w for w in result["warnings"])


def test_a_grpo_probe_with_gspo_makes_one_pass_under_adam(monkeypatch):
    import gradprobe.probe.direction as probe_pkg  # where the probe looks token_alignment up

    calls = []
    real = probe_pkg.token_alignment
    monkeypatch.setattr(probe_pkg, "token_alignment", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    result = run_probe(_config(precondition="adam", rewards=("outcome",), loss_types=("gspo",)))
    assert len(calls) == 1
    e = _by_name(result)
    assert e["outcome@gspo"]["alignment_family"] == "grpo" and e["outcome@gspo"]["alignment_pass"] == 0
    assert _close(e["outcome@gspo"]["inner_product"], e["outcome"]["inner_product"], rel=1e-12)
    assert result["costs"]["extra_alignment_passes"] == 0 and result["costs"]["extra_alignment_pass_seconds"] == 0.0
    assert not any("alignment pass" in w for w in result["warnings"])


def test_without_adam_every_loss_type_shares_one_pass(monkeypatch):
    import gradprobe.probe.direction as probe_pkg  # where the probe looks token_alignment up

    calls = []
    real = probe_pkg.token_alignment
    monkeypatch.setattr(probe_pkg, "token_alignment", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    result = run_probe(_config(rewards=("outcome",), loss_types=("bnpo", "dr_grpo")))
    assert len(calls) == 1
    assert {(r["alignment_family"], r["alignment_pass"]) for r in result["rewards"]} == {(None, 0)}
    assert result["reference"]["alignment_families"] is None and result["costs"]["extra_alignment_passes"] == 0
