"""A ``--reference-curve`` JSON file that does not parse, and ``--initial-accuracy`` beside a file's own step-0 eval
(a trial user's findings):

- a truncated trainer state given with ``--reference-curve-metric`` (or ``--reference-curve-scale``) was refused as
  "a saved curve, which has none; leave it out": a ``.json`` that does not parse has no kind, so the cause (truncated,
  re-copy it) comes first, as without the option; a truncated trainer state under another name was "unknown kind";
- a file cut inside a string, a number, a literal or a ``\\uXXXX`` escape was called damaged: it is truncated (it
  ends mid-value), and a whole text that is wrong inside is still damaged;
- ``--initial-accuracy 1.5`` beside a trainer state in fractions that has its own step-0 eval was only noted as
  skipped: a value on another scale than the file's evals is refused whether or not it is used.
"""

from __future__ import annotations

import json

import pytest

from gradprobe.cli import main
from gradprobe.forecast.curves import CurveError, ReferenceCurve, load_reference_curve

KEY = "eval_rewards/accuracy_reward/mean"
#: the trial's trainer_state.json (a GRPOTrainer log, evals at every 50 steps from step 0)
STATE = {"global_step": 250, "log_history": [
    entry for s, v in zip(range(0, 300, 50), (0.41, 0.45, 0.5, 0.52, 0.55, 0.56))
    for entry in ({"step": s, "loss": 0.1}, {"step": s, KEY: v, "eval_loss": 0.2})]}
TEXT = json.dumps(STATE, indent=1)  # as TRL writes it
TRUNCATED = ("the file is truncated (it ends mid-value: a copy cut short, or taken while it was being written); it "
             "looks like a TRL trainer state: re-copy trainer_state.json from the TRL run's output_dir (its last "
             "checkpoint-N/), or pass that output_dir itself to --reference-curve")
DAMAGED = TRUNCATED.replace("the file is truncated (it ends mid-value: a copy cut short, or taken while it was being "
                            "written)", "the file is damaged")
SMALL = ["--prompts", "4", "--group", "4", "--heldout-prompts", "4", "--heldout-group", "4", "--no-progress",
         "--bootstrap", "100", "--rewards", "outcome"]


def _refusal(path, **kw) -> str:
    with pytest.raises(CurveError) as info:
        load_reference_curve(str(path), **kw)
    return str(info.value)


def _cut(tmp_path, text: str, name: str = "trainer_state_trunc.json"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_trial_file_cut_inside_a_key_is_truncated_with_or_without_the_read_options(tmp_path):
    """The trial's trainer_state_trunc.json ends inside the key ``"eval_`` (json: Unterminated string)."""
    path = _cut(tmp_path, TEXT[:TEXT.index('"eval_loss"', TEXT.index('"step": 100')) + 6])
    assert path.read_text().endswith('"eval_rewards/accuracy_reward/mean": 0.5,\n   "eval_')
    expected = (f"reference curve file {str(path)!r} is not valid JSON (Unterminated string starting at: line 29 "
                f"column 4 (char 405)): {TRUNCATED}")
    assert _refusal(path) == expected
    for kw in ({"metric": KEY}, {"metric": "loss"}, {"accuracy_scale": "points"}, {"metric": KEY, "mode": "sigmoid"}):
        assert _refusal(path, **kw) == expected, kw  # was: "... is a saved curve, which has none; leave it out"


def test_the_cli_names_the_truncated_file_not_the_metric_option(tmp_path, capsys):
    path = _cut(tmp_path, TEXT[:405] + '"eval_')
    out = tmp_path / "p"
    assert main(["probe", *SMALL, "--out", str(out), "--reference-curve", str(path),
                 "--reference-curve-metric", KEY]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"gradprobe probe: error: reference curve file {str(path)!r} is not valid JSON (Unterminated "
                   f"string starting at: line 29 column 4 (char 405)): {TRUNCATED}") and not out.exists()


def test_a_saved_curve_that_does_not_parse_is_named_before_the_options(tmp_path):
    saved = ReferenceCurve(updates=[0, 2, 5, 10, 20, 40], accuracy=[40.0, 45.0, 52.0, 60.0, 66.0, 68.0])
    path = tmp_path / "curve.json"
    saved.save(path)
    text = path.read_text()
    path.write_text(text[:text.index('"params"') + 12])  # cut inside a number or a key
    msg = _refusal(path, metric=KEY)
    assert msg.startswith(f"reference curve file {str(path)!r} is not valid JSON (") and msg.endswith(
        "): the file is truncated (it ends mid-value: a copy cut short, or taken while it was being written); "
        "re-copy it, or rebuild the curve from its source and write it with ReferenceCurve.save"), msg
    assert msg == _refusal(path) == _refusal(path, accuracy_scale="fraction")
    path.write_bytes(b'{"format": "\xff"}')  # not UTF-8: its own refusal, before the options too
    assert _refusal(path, metric=KEY).startswith(f"reference curve file {str(path)!r} cannot be read as JSON: it is "
                                                  "not UTF-8 text ('utf-8' codec can't decode byte 0xff")


def test_a_damaged_json_file_is_named_before_the_options(tmp_path):
    path = _cut(tmp_path, TEXT.replace('"step": 100,', '"step": 100', 1), name="state.json")  # a comma lost
    msg = _refusal(path, metric=KEY)
    assert msg == _refusal(path) and msg.endswith(f"is not valid JSON (Expecting ',' delimiter: line 24 column 4 "
                                                  f"(char 319)): {DAMAGED}"), msg


def test_a_truncated_trainer_state_under_another_name_is_named_truncated(tmp_path):
    """A trainer state is read by its content under any name; cut short, its text still holds "log_history"."""
    path = _cut(tmp_path, TEXT[:300], name="state_copy.txt")
    assert _refusal(path, metric=KEY) == (f"reference curve file {str(path)!r} is not valid JSON (Expecting "
                                          "property name enclosed in double quotes: line 22 column 4 (char 300)): "
                                          f"{TRUNCATED}")
    other = _cut(tmp_path, '{"updates": [1, 2', name="notes.txt")  # no log_history, no .json: an unknown kind
    assert _refusal(other).startswith(f"--reference-curve {str(other)!r}: unknown kind of file; expected ")


@pytest.mark.parametrize("end, where", [
    ('"eval_rewards/accu', "inside a key"),
    ('"eval_rewards/accuracy_reward/mean": 0.45, "note": "half way', "inside a string value"),
    ('"eval_rewards/accuracy_reward/mean": 0.', "inside a number, after its point"),
    ('"eval_rewards/accuracy_reward/mean": 4.5e', "inside a number, after its e"),
    ('"eval_rewards/accuracy_reward/mean": -', "inside a number, after its sign"),
    ('"done": tr', "inside true"),
    ('"done": fals', "inside false"),
    ('"eval_rewards/accuracy_reward/mean": nu', "inside null"),
    ('"eval_rewards/accuracy_reward/mean": Na', "inside NaN (which Python's json writes)"),
    ('"eval_rewards/accuracy_reward/mean": -Infin', "inside -Infinity"),
    ('"note": "caf\\u00', "inside a \\uXXXX escape"),
    ('"note": "caf\\u00e9', "right after a \\uXXXX escape"),
    ('"note": "a\\', "after a backslash"),
])
def test_a_file_cut_inside_a_value_is_truncated(tmp_path, end, where):
    path = _cut(tmp_path, '{"log_history": [{"step": 0, ' + end)
    msg = _refusal(path)
    assert msg.endswith(f"): {TRUNCATED}"), (where, msg)  # was: "the file is damaged"
    assert _refusal(path, metric=KEY) == msg


def test_every_cut_of_a_trainer_state_is_truncated(tmp_path):
    """Cut after any character (TRL's indented form and a compact one, with literals, a NaN and an escape), the
    file is called truncated; json's checks are read from its error (its position and message), not guessed."""
    state = {"log_history": [{"step": 0, KEY: 0.41, "flag": True, "none": None, "off": False, "bad": float("nan"),
                              "low": -1.5e-3, "note": "caf\u00e9 \"q\" \\"}, {"step": 50, KEY: 0.45}]}
    for text in (json.dumps(state, indent=1), json.dumps(state)):
        wrong = []
        for k in range(1, len(text)):
            path = _cut(tmp_path, text[:k], name="cut.json")
            msg = _refusal(path)
            if not msg.endswith(f"): {TRUNCATED}") and '"log_history"' in text[:k]:
                wrong.append((text[:k][-20:], msg))
            elif '"log_history"' not in text[:k] and "the file is truncated" not in msg:
                wrong.append((text[:k][-20:], msg))  # too short to be known as a trainer state: still truncated
        assert not wrong, wrong[:3]


@pytest.mark.parametrize("text, error", [
    ('{"log_history": [{"step": 0, "eval_accuracy": "0.4}]}', "Unterminated string starting at"),  # a quote lost
    ('{"log_history": [{"step": 0, "eval_accuracy": 0.4}]}}', "Extra data"),
    ('{"log_history": [{"step": 0, "eval_accuracy": 0.4}]} 5', "Extra data"),  # a whole text, then more
    ('{"log_history": [{"step": 0 "eval_accuracy": 0.4}]}', "Expecting ',' delimiter"),
    ('{"log_history": [{"step": 0, "eval_accuracy": tru}]}', "Expecting value"),
    ('{"log_history": [{"step": 0, "note": "a\nb"}]}', "Invalid control character at"),
    ('{"log_history": [{"step": 0, "note": "\\u00zz"}]}', "Invalid \\uXXXX escape"),
    ('{"log_history": [{"step": 0, "eval_accuracy": x', "Expecting value"),  # ends in no value's fragment
])
def test_a_text_wrong_inside_is_damaged(tmp_path, text, error):
    """Each text is whole up to a wrong character (or ends in no value's fragment): as before, damaged."""
    path = _cut(tmp_path, text)
    msg = _refusal(path)
    assert f"is not valid JSON ({error}" in msg and msg.endswith(f"): {DAMAGED}"), msg
    assert _refusal(path, metric=KEY) == msg


def _own_step_0(tmp_path, scale: float = 1.0):
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"log_history": [
        {"step": e["step"], KEY: e[KEY] * scale} if KEY in e else e for e in STATE["log_history"]]}))
    return path


def test_initial_accuracy_above_1_beside_fractions_is_refused_though_the_file_has_its_own_step_0(tmp_path):
    path = _own_step_0(tmp_path)
    assert _refusal(path, metric=KEY, initial_accuracy=1.5) == (
        f"initial_accuracy (--initial-accuracy) 1.5 is on another scale than the evals of {path}, which are "
        "fractions (range 0.41-0.56): give it as a fraction as the file's evals are (0.015, if 1.5 is points), or "
        "leave it out (each file has its own eval at step 0, which is read as R0 instead)")  # was: a note only
    curve = load_reference_curve(path, metric=KEY, initial_accuracy=0.5)  # in the file's scale: kept, and noted
    assert curve.params["R0"] == pytest.approx(41.0) and curve.skipped_notes == [
        f"initial_accuracy (--initial-accuracy) 0.5 skipped for 1 file(s) with their own eval at step 0, which is "
        f"read instead: {path} (0.41)"]


def test_a_fraction_beside_points_is_refused_though_the_file_has_its_own_step_0(tmp_path):
    path = _own_step_0(tmp_path, scale=100.0)
    assert _refusal(path, metric=KEY, initial_accuracy=0.5) == (
        f"initial_accuracy (--initial-accuracy) 0.5 is on another scale than the evals of {path}, which are points "
        "(range 41-56): as points it would be 0.5 points; give it in points (50), or state the scale with "
        "accuracy_scale='points' (--reference-curve-scale points) if it is points as it stands, or leave it out "
        "(each file has its own eval at step 0, which is read as R0 instead)")
    assert load_reference_curve(path, metric=KEY, initial_accuracy=50).params["R0"] == pytest.approx(41.0)
    stated = load_reference_curve(path, metric=KEY, initial_accuracy=0.5, accuracy_scale="points")
    assert stated.params["R0"] == pytest.approx(41.0)  # a stated scale is not second-guessed


def test_the_cli_refuses_initial_accuracy_1_5_beside_a_step_0_eval(tmp_path, capsys):
    path = _own_step_0(tmp_path)
    out = tmp_path / "p"
    assert main(["probe", *SMALL, "--out", str(out), "--reference-curve", str(path), "--reference-curve-metric", KEY,
                 "--initial-accuracy", "1.5"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("gradprobe probe: error: initial_accuracy (--initial-accuracy) 1.5 is on another scale "
                          f"than the evals of {path}, which are fractions") and not out.exists(), err


LATIN1 = TEXT.replace('"loss": 0.1', '"loss": 0.1, "run": "café"', 1).encode("latin-1")  # re-encoded: not UTF-8
CODEC = "'utf-8' codec can't decode byte 0xe9 in position "
def _utf8(path):
    """The converted file the fix names: beside ``path``, with ``_utf8`` before its suffix."""
    return path.with_name(f"{path.stem}_utf8{path.suffix}")


TRL_FIX = ("or pass the checkpoint's own trainer_state.json (this file holds a TRL trainer state's \"log_history\"; "
           "TRL writes it as UTF-8)")


@pytest.mark.parametrize("name", ["state.log", "state_copy.txt", "state.json"])
def test_a_trainer_state_that_is_not_utf8_is_named_so_under_any_name(tmp_path, name):
    """It was "unknown kind of file" under a name without .json, and "rewrite it with ReferenceCurve.save" under
    one with .json: neither said what is wrong (the encoding) nor how to fix a trainer state."""
    path = tmp_path / name
    path.write_bytes(LATIN1)
    msg = _refusal(path, metric=KEY)
    assert msg.startswith(f"reference curve file {str(path)!r} cannot be read as JSON: it is not UTF-8 text ({CODEC}")
    assert msg.endswith(f"convert it (e.g. `iconv -f latin1 -t utf-8 {path} > {_utf8(path)}`), "
                        + TRL_FIX), msg
    assert msg == _refusal(path)
    path.write_bytes(LATIN1.decode("latin-1").encode())  # the converted file reads
    assert load_reference_curve(str(path), metric=KEY).n_seeds == 1


@pytest.mark.parametrize("folder", [False, True])
def test_a_trainer_state_json_that_is_not_utf8_says_it_was_re_encoded(tmp_path, folder):
    """TRL's own file (or its checkpoint folder) was "not a TRL trainer_state.json with a 'log_history' list"."""
    path = tmp_path / "checkpoint-250" / "trainer_state.json"
    path.parent.mkdir()
    path.write_bytes(LATIN1)
    msg = _refusal(path.parent if folder else path, metric=KEY)
    assert msg == (f"{path} cannot be read as JSON: it is not UTF-8 text ({CODEC}{LATIN1.index(b'caf') + 3}: "
                   "invalid continuation byte); TRL writes it as UTF-8: re-copy it from the run's checkpoint-N/, or "
                   f"convert it (e.g. `iconv -f latin1 -t utf-8 {path} > {_utf8(path)}`)"), msg


def test_a_saved_curve_that_is_not_utf8_keeps_its_own_fix(tmp_path):
    path = tmp_path / "curve.json"
    path.write_bytes(b'{"format": "\xff"}')
    assert _refusal(path) == (f"reference curve file {str(path)!r} cannot be read as JSON: it is not UTF-8 text "
                              "('utf-8' codec can't decode byte 0xff in position 12: invalid start byte); convert it "
                              f"(e.g. `iconv -f latin1 -t utf-8 {path} > {_utf8(path)}`), or rewrite a saved "
                              "curve with ReferenceCurve.save")


@pytest.mark.parametrize("name", ["state.log", "state.json"])
def test_a_utf16_trainer_state_is_named_utf16_with_its_own_conversion(tmp_path, name):
    """UTF-16 has a NUL between characters: the trainer state was not recognised ("unknown kind of file"), and the
    fix said to convert from latin-1, which turns UTF-16 into text full of NULs."""
    path = tmp_path / name
    path.write_bytes(TEXT.encode("utf-16"))
    assert _refusal(path) == (f"reference curve file {str(path)!r} cannot be read as JSON: it is UTF-16 text; "
                              f"convert it (`iconv -f utf-16 -t utf-8 {path} > {_utf8(path)}`), "
                              + TRL_FIX)
    path.write_bytes(TEXT.encode("utf-16").decode("utf-16").encode())  # converted: it reads
    assert load_reference_curve(str(path), metric=KEY).n_seeds == 1


@pytest.mark.parametrize("name", ["trainer_state.json", "state.json", "state.txt"])
def test_a_utf8_byte_order_mark_is_read_not_called_damaged(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(b"\xef\xbb\xbf" + TEXT.encode())
    plain = tmp_path / "plain" / name
    plain.parent.mkdir()
    plain.write_text(TEXT)
    a, b = load_reference_curve(str(path), metric=KEY), load_reference_curve(str(plain), metric=KEY)
    assert a.params == b.params and a.n_seeds == 1


def test_a_compressed_trainer_state_says_decompress_it(tmp_path):
    import gzip

    path = tmp_path / "trainer_state.json"
    path.write_bytes(gzip.compress(TEXT.encode()))
    assert _refusal(path).endswith("it is gzip-compressed; TRL writes it as UTF-8: re-copy it from the run's "
                                   f"checkpoint-N/, or decompress it (`gunzip -c {path} > {_utf8(path)}`)")


def test_a_csv_or_metrics_jsonl_that_is_not_utf8_names_the_encoding(tmp_path):
    """A latin-1 CSV was "cannot be read as a CSV (... position 0: unexpected end of data); a header line ... is
    expected" (pandas' chunk offset, blaming the header); a latin-1 metrics.jsonl escaped as a bare
    UnicodeDecodeError naming no file."""
    csv = tmp_path / "curve.csv"
    csv.write_bytes("update,accuracy,note\n0,0.5,café\n5,0.6,x\n10,0.62,y\n20,0.65,z\n".encode("latin-1"))
    assert _refusal(csv) == (f"{csv} cannot be read as a CSV: it is not UTF-8 text ('utf-8' codec can't decode byte "
                             "0xe9 in position 30: invalid continuation byte); convert it (e.g. `iconv -f latin1 -t "
                             f"utf-8 {csv} > {_utf8(csv)}`)")
    log = tmp_path / "metrics.jsonl"
    log.write_bytes('{"update": 0, "eval": true, "greedy_accuracy": 0.5, "note": "café"}\n'.encode("latin-1"))
    assert _refusal(log).startswith(f"{log} cannot be read as JSON lines: it is not UTF-8 text ('utf-8' codec")


@pytest.mark.parametrize("name", ["metrics.jsonl.gz", "curve.csv.gz"])
def test_a_gz_curve_says_decompress_it(tmp_path, name):
    """It was "unknown kind of file"."""
    import gzip

    path = tmp_path / name
    path.write_bytes(gzip.compress(b"update,accuracy\n0,0.5\n"))
    msg = _refusal(path)
    assert msg.startswith(f"--reference-curve {str(path)!r} is gzip-compressed: decompress it (`gunzip -k {path}`) "
                          f"and pass the file it gives ({name[:-3]}); expected "), msg


@pytest.mark.parametrize("name", ["state.txt", "state.json", "trainer_state.json"])
@pytest.mark.parametrize("encoding", ["utf-16le", "utf-16be"])
def test_a_utf16_trainer_state_without_a_byte_order_mark_gets_the_trl_fix(tmp_path, encoding, name):
    """A reviewer: under a name other than .json it was "unknown kind of file", as state.json the saved-curve fix."""
    path = tmp_path / name
    path.write_bytes(TEXT.encode(encoding))
    msg = _refusal(path)
    told = f"({encoding[-2:].upper()}, told by its NUL high bytes)"
    assert f"it is UTF-16 text without a byte-order mark {told}" in msg, msg
    assert "TRL writes it as UTF-8" in msg and "ReferenceCurve.save" not in msg, msg


def test_utf16_without_a_byte_order_mark_and_with_other_scripts_is_utf16(tmp_path):
    csv = tmp_path / "curve.csv"
    csv.write_bytes(("update,accuracy,model\n" + "".join(f"{u},{a},模型\n" for u, a in ((0, .5), (5, .6), (10, .62),
                                                                                   (20, .65)))).encode("utf-16le"))
    assert "it is UTF-16 text without a byte-order mark (LE" in _refusal(csv)


@pytest.mark.parametrize("encoding", ["utf-16le", "utf-16be"])
def test_utf16_without_a_byte_order_mark_is_named_not_read_as_garbage(tmp_path, encoding):
    """A CSV saved as UTF-16 without a byte-order mark is valid UTF-8 (ASCII with a NUL between characters): it was
    read as garbage columns and refused as a CSV without an update column. A metrics.jsonl so saved was "damaged"."""
    csv = tmp_path / "curve.csv"
    csv.write_bytes("update,accuracy\n0,0.5\n5,0.6\n10,0.62\n20,0.65\n".encode(encoding))
    assert _refusal(csv) == (f"{csv} cannot be read as a CSV: it is UTF-16 text without a byte-order mark "
                             f"({encoding[-2:].upper()}, told by its NUL high bytes); convert it "
                             f"(`iconv -f {encoding} -t utf-8 {csv} > {_utf8(csv)}`)")
    log = tmp_path / "metrics.jsonl"
    log.write_bytes('{"update": 0, "eval": true, "greedy_accuracy": 0.5}\n'.encode(encoding))
    assert _refusal(log) == (f"{log} cannot be read as JSON lines: it is UTF-16 text without a byte-order mark "
                             f"({encoding[-2:].upper()}, told by its NUL high bytes); convert it "
                             f"(`iconv -f {encoding} -t utf-8 {log} > {_utf8(log)}`)")


def test_a_nul_byte_in_a_utf8_csv_is_named_binary(tmp_path):
    csv = tmp_path / "curve.csv"
    csv.write_bytes(b"update,accuracy\n0,0.5\n5,0.6\x00\n10,0.62\n20,0.65\n")
    assert _refusal(csv) == (f"{csv} cannot be read as a CSV: it is not text (it holds NUL bytes, the first at line 3, "
                             "byte 27: a binary or damaged file); re-copy it from its source")


@pytest.mark.parametrize("name", ["metrics.jsonl", "curve.csv"])
def test_a_tail_of_nul_bytes_is_a_write_cut_short_with_the_text_before_it_kept(tmp_path, name):
    """A crash while a run's log grew leaves NUL bytes at its end (a reviewer's case): the message said "binary or
    damaged, re-copy it", with no line and nothing to re-copy a run's own log from."""
    import json as _json
    import subprocess

    evals = ((0, 0.5), (5, 0.6), (10, 0.62), (20, 0.65))
    text = ("".join(_json.dumps({"update": u, "eval": True, "greedy_accuracy": a}) + "\n" for u, a in evals)
            if name.endswith("jsonl") else "update,accuracy\n" + "".join(f"{u},{a}\n" for u, a in evals))
    path = tmp_path / name
    path.write_bytes(text.encode() + b"\x00" * 4096)
    what = "JSON lines" if name.endswith("jsonl") else "a CSV"
    kept = _utf8(path)
    line = 6 if name.endswith("csv") else 5  # the line after the last one (a CSV has a header)
    assert _refusal(path) == (f"{path} cannot be read as {what}: it ends in 4096 NUL bytes from line {line} (byte "
                              f"{len(text)}): a write cut short when the machine stopped; keep the text before them "
                              f"(`head -c {len(text)} {path} > {kept}`), or re-copy it")
    subprocess.run(f"head -c {len(text)} {path} > {kept}", shell=True, check=True)
    assert load_reference_curve(str(kept)).n_seeds == 1
