"""A probe of a reward whose plug-in file name has a byte that is not UTF-8 (``r\\xff.py``, valid on Linux; its name
as Python sees it, ``os.fsdecode``, holds the lone surrogate ``\\udcff``, so the reward is ``r\\udcff.py:reward``).
The reward loaded, but the probe then crashed with ``'utf-8' codec can't encode character '\\udcff'``: the
safetensors key ``advantages.<reward>`` and ``report.html`` are UTF-8, which has no form for a lone surrogate, and
pandas' text labels (``ProbeResult.table``'s index, ``tokens()``'s columns) are UTF-8 too. The key now writes the
surrogate escaped (``advantages.r\\udcff.py:reward``, as the tables show it; every other name's key is unchanged) and
the reader maps a name the same way; the page shows the name escaped; probe.json and tokens.jsonl keep the name whole
(JSON's ``\\udcff`` escape), so ``load_probe`` gives back the reward's own name and finds its advantages.
A real run of the cheapest probe (tiny-qwen2, 2x2 completions of 4 tokens)."""

from __future__ import annotations

import json

import pytest
import torch
from plugin_helpers import UNDECODABLE_NAMES, undecodable_plugin_folder
from safetensors.torch import load_file

from gradprobe import load_probe
from gradprobe.cli import main
from gradprobe.probe.output import advantages_key
from gradprobe.probe.report_html import render_probe_report
from gradprobe.probe.run import run_probe
from gradprobe.probe_settings import ProbeConfig
from gradprobe.rewards import get_reward

#: a TRL-style reward: 0, 1, 0, 1 down the batch, so each group of 2 has advantages -1/sqrt(2), +1/sqrt(2)
ODD_ROWS = "def reward(completions, **kwargs):\n    return [float(i % 2) for i, _ in enumerate(completions)]\n"
NAME = "r\udcff.py:reward"  #: the reward's name (its spec), as probe.json and load_probe give it
SHOWN = "r\\udcff.py:reward"  #: how tables, the page and the safetensors key write it


pytestmark = UNDECODABLE_NAMES


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A working directory holding ``r\\xff.py`` (:func:`plugin_helpers.undecodable_plugin_folder`)."""
    with undecodable_plugin_folder(tmp_path, monkeypatch, ODD_ROWS) as where:
        yield where


def test_a_probe_of_such_a_reward_writes_its_files_and_reads_them_back(folder, capsys):
    out = folder / "out"
    rc = main(["probe", "--model", "tiny-qwen2", "--task", "chain_sum", "--rewards", f"outcome,{NAME}",
               "--prompts", "2", "--group", "2", "--heldout-prompts", "1", "--heldout-group", "2",
               "--max-new-tokens", "4", "--bootstrap", "0", "--no-progress", "--out", str(out)])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert sorted(p.name for p in out.iterdir()) == ["alignment.safetensors", "probe.json", "report.html",
                                                     "tokens.jsonl"]
    assert any(line.startswith(SHOWN + " ") for line in captured.out.splitlines())  # the table's row, escaped
    half = 2 ** -0.5
    tensors = load_file(out / "alignment.safetensors")
    assert sorted(k for k in tensors if k.startswith("advantages.")) == ["advantages.outcome", f"advantages.{SHOWN}"]
    saved = tensors[f"advantages.{SHOWN}"]
    assert saved[:, 0].tolist() == pytest.approx([-half, half, -half, half], abs=1e-3)
    # probe.json and tokens.jsonl: the name whole, as JSON's escape of the surrogate
    assert '"r\\udcff.py:reward"' in (out / "probe.json").read_text()
    assert [r["name"] for r in json.loads((out / "probe.json").read_text())["rewards"]] == ["outcome", NAME]
    rows = [json.loads(x) for x in (out / "tokens.jsonl").read_text().splitlines()]
    assert rows[1]["advantages"][NAME] == pytest.approx([half] * len(rows[1]["tokens"]), abs=1e-3)
    page = (out / "report.html").read_text(encoding="utf-8")
    assert page.count(f"<td>{SHOWN}</td>") == 1 and f'data-reward="{SHOWN}"><h3>{SHOWN}</h3>' in page
    result = load_probe(out)
    assert result.rewards == ["outcome", NAME]
    assert torch.equal(result.advantages(NAME), saved)  # the name load_probe gives finds its advantages
    assert result.table.loc[NAME, "tokens_per_update"] == 16 and list(result.table.index) == ["outcome", NAME]
    tokens = result.tokens()
    assert f"advantage_{NAME}" in tokens.columns
    assert tokens[f"advantage_{NAME}"].tolist() == pytest.approx(saved[result.completion_mask].tolist())


def test_the_key_escapes_only_a_lone_surrogate():
    assert advantages_key("outcome") == "advantages.outcome"
    assert advantages_key("a\tb\u00e9:r") == "advantages.a\tb\u00e9:r"  # UTF-8 can hold it: as before
    assert advantages_key(NAME) == f"advantages.{SHOWN}"
    advantages_key(NAME).encode("utf-8")


def test_two_names_under_one_key_are_refused_before_any_compute(folder):
    reward = get_reward("outcome")
    with pytest.raises(ValueError) as e:
        run_probe(ProbeConfig.from_dict({"model": "tiny-qwen2", "rewards": ("outcome",)}), out=folder / "o",
                  extra_rewards={NAME: reward, SHOWN: reward})
    assert str(e.value) == (f"rewards {NAME!r} and {SHOWN!r} would save their advantages under one key "
                            f"('advantages.r\\\\udcff.py:reward') in alignment.safetensors: probe them in separate "
                            "runs, or rename one's file")
    assert not (folder / "o").exists()


def test_the_page_shows_names_escaped_and_any_other_surrogate_too():
    entry = {"name": "a\nb\udcff", "inner_product": 0.0, "interval": None, "snr": None, "tokens_per_update": 4,
             "predicted_gain_per_update": 0.0, "predicted_gain_at_budget": 0.0}
    result = {"config": {"model": "m", "task": "t\udcfe", "budget_tokens": 1000}, "rewards": [entry],
              "batch": {"mean_reward": 0.5, "truncation_rate": 0.0}, "warnings": ["file q\udcfd.py"]}
    page = render_probe_report(result, [{"row": 0, "texts": ["x"], "alignment": [1.0],
                                         "advantages": {"a\nb\udcff": [2.0]}}])
    page.encode("utf-8")
    assert "<td>a\\nb\\udcff</td>" in page and '<h3>a\\nb\\udcff</h3>' in page  # as the printed table shows it
    assert "task <b>t\\udcfe</b>" in page and "warning: file q\\udcfd.py" in page
