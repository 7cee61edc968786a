"""gradprobe's leftover defects: an empty --loss-types item, an empty --calibration or --trl-config, a
metrics.jsonl accuracy written as a JSON string, an option a command does not have."""

from __future__ import annotations

import json

import pytest

from gradprobe.cli import main
from gradprobe.forecast import CurveError, ReferenceCurve
from gradprobe.probe_settings import ProbeConfig
from gradprobe.probe_settings.stages import UpdateSettings

PROBE = ["probe", "--model", "tiny-qwen2", "--task", "chain_sum", "--rewards", "outcome", "--prompts", "2", "--group",
         "2", "--heldout-prompts", "2", "--heldout-group", "2", "--max-new-tokens", "8", "--bootstrap", "50",
         "--no-progress"]


@pytest.mark.parametrize("value", [",", "bnpo,", ",bnpo", "bnpo,,cispo", " , "])
def test_a_loss_types_list_with_an_empty_item_is_refused(value):
    with pytest.raises(ValueError) as e:
        UpdateSettings(loss_types=value)
    assert str(e.value) == (f"loss_types (--loss-types) {value!r} has an empty item; give loss types separated by "
                            "single commas (e.g. bnpo,cispo), or omit the option for none")
    with pytest.raises(ValueError, match=r"^loss_types \(--loss-types\) .* has an empty item"):
        ProbeConfig.from_dict({"loss_types": value})


def test_no_loss_types_and_a_list_without_empty_items_are_still_taken():
    assert UpdateSettings(loss_types="").loss_types == () == UpdateSettings(loss_types="  ").loss_types
    assert UpdateSettings(loss_types=" bnpo , cispo ").loss_types == ("bnpo", "cispo")


def test_cli_loss_types_comma_is_refused_before_anything_is_written(tmp_path, capsys):
    out = tmp_path / "o"
    assert main([*PROBE, "--out", str(out), "--loss-types", ","]) == 2
    err = capsys.readouterr().err
    assert err == ("gradprobe probe: error: loss_types (--loss-types) ',' has an empty item; give loss types separated "
                   "by single commas (e.g. bnpo,cispo), or omit the option for none\n")
    assert not out.exists()


def _argparse_error(argv: list[str], capsys) -> tuple[str, str]:
    """(first line, last line) of stderr of ``gradprobe ARGV`` refused by argparse (exit status 2)."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    return lines[0], lines[-1]


@pytest.mark.parametrize("value", ["", " "])
def test_an_empty_calibration_or_trl_config_is_refused_as_empty(tmp_path, capsys, value):
    out = tmp_path / "o"
    _, last = _argparse_error([*PROBE, "--out", str(out), "--calibration", value], capsys)
    assert last == (f"gradprobe probe: error: argument --calibration: is empty ({value!r}): give the calibration file "
                    "`calib fit ROWS.csv --out FILE.json` wrote, or 'default' (the shipped one) (an unset shell "
                    "variable gives an empty value)")
    _, last = _argparse_error([*PROBE, "--out", str(out), "--trl-config", value], capsys)
    assert last == (f"gradprobe probe: error: argument --trl-config: is empty ({value!r}): give your TRL GRPOConfig "
                    "file (YAML or JSON), or omit the option (an unset shell variable gives an empty value)")
    assert not out.exists()


def _metrics(tmp_path, bad: dict, line: int = 2):
    """A metrics.jsonl of four evals whose line ``line`` (1-based) has the fields ``bad`` instead."""
    recs = [{"eval": True, "update": u, "greedy_accuracy": a} for u, a in ((0, 0.5), (2, 0.6), (4, 0.65), (8, 0.7))]
    recs[line - 1].update(bad)
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


@pytest.mark.parametrize("bad, shown, field", [
    ({"greedy_accuracy": "0.676"}, "'0.676' is not a number (a JSON string: write the number unquoted); fix or "
                                   "delete that eval", "greedy_accuracy"),
    ({"greedy_accuracy": "nan"}, "'nan' is not a number (a JSON string: write the number unquoted)", "greedy_accuracy"),
    ({"greedy_accuracy": "n/a"}, "'n/a' is not a number; fix or delete that eval", "greedy_accuracy"),
    ({"update": "2"}, "'2' is not a number (a JSON string: write the number unquoted)", "update"),
    ({"greedy_accuracy": True}, "true is not a number; fix or delete that eval", "greedy_accuracy"),
], ids=["string", "string-nan", "string-text", "string-update", "bool"])
def test_a_metric_that_is_a_json_string_or_bool_is_refused_naming_file_line_and_field(tmp_path, bad, shown, field):
    path = _metrics(tmp_path, bad)
    with pytest.raises(CurveError) as e:
        ReferenceCurve.from_metrics(path)
    assert str(e.value).startswith(f"{path}:2: field {field!r} = {shown}")
    assert ReferenceCurve.from_metrics(_metrics(tmp_path, {})).notes is not None  # the same file with numbers: read


def test_cli_reference_curve_with_a_string_accuracy_is_refused_before_anything_is_written(tmp_path, capsys):
    path, out = _metrics(tmp_path, {"greedy_accuracy": "0.676"}, line=3), tmp_path / "o"
    assert main([*PROBE, "--out", str(out), "--reference-curve", str(path)]) == 2
    assert capsys.readouterr().err == (f"gradprobe probe: error: {path}:3: field 'greedy_accuracy' = '0.676' is not a "
                                       "number (a JSON string: write the number unquoted); fix or delete that eval\n")
    assert not out.exists()


@pytest.mark.parametrize("command, required", [
    ("probe", []), ("warmstart", []), ("study", []), ("train", ["--plan", "p.toml", "--arm", "grpo", "--out", "o"]),
    ("rank-prompts", ["--model", "tiny", "--task", "chain_sum", "--pool", "4", "--out", "o"]),
    ("difficulty-eval", ["--model", "tiny", "--task", "chain_sum", "--pool", "4", "--out", "o"]),
])
def test_an_option_a_command_does_not_have_gets_that_commands_usage(tmp_path, capsys, monkeypatch, command, required):
    monkeypatch.chdir(tmp_path)
    first, last = _argparse_error([command, *required, "--steps=0"], capsys)  # (study: "0" would be its PLAN)
    assert first.startswith(f"usage: gradprobe {command} [-h]")
    assert last == (f"gradprobe {command}: error: unrecognized arguments: --steps=0; `gradprobe {command} --help` "
                    "lists its options")
    assert list(tmp_path.iterdir()) == []


def test_warmstart_steps_gets_warmstart_usage(capsys):  # the tester's command
    first, last = _argparse_error(["warmstart", "--steps", "0"], capsys)
    assert first.startswith("usage: gradprobe warmstart [-h] [--tier {tiny,tiny-llama-sft}]")
    assert last == ("gradprobe warmstart: error: unrecognized arguments: --steps 0; `gradprobe warmstart --help` lists "
                    "its options")


def test_an_unknown_option_before_the_command_keeps_the_top_level_usage(capsys):
    first, last = _argparse_error(["--steps=0", "warmstart"], capsys)
    assert first == "usage: gradprobe [-h] [-v] COMMAND [OPTIONS]"
    assert last == "gradprobe: error: unrecognized arguments: --steps=0"
