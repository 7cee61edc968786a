"""The note on rewards that cost only cannot tell apart quotes the tokens per update the forecast read: with
``--update-prompts 32`` the forecast rescales them to the curve's update (15,029), and the note quoted the probe's raw
30,058, a number the forecast never used."""

from calib.apply import TIED, _tie_note


def _tied():
    return [{"name": n, "caveats": [], "forecast": -3.322, "calibrated_gain": -3.212} for n in ("mc_value", "hybrid")]


def test_the_tie_note_quotes_the_forecasts_tokens_per_update():
    probe = {"rewards": [{"name": n, "tokens_per_update": 30058} for n in ("mc_value", "hybrid")],
             "forecast": {"rows": [{"arm": "mc_value", "tokens_per_update": 15029.0},
                                   {"arm": "hybrid", "tokens_per_update": 15029.0}]}}
    block = {"verdict_forecaster": "cost_only", "forecaster_name": "cost_only"}
    tied = _tied()
    note = _tie_note("forecast_cost_only", tied, probe, block)
    assert note.startswith("['mc_value', 'hybrid'] have the same forecast_cost_only (-3.322; cost only reads only the "
                           "tokens per update: 15,029 for each), so the calibration gives them the same")
    assert all(r["caveats"] == [TIED] for r in tied)
    del probe["forecast"]  # a probe without a forecast: the raw table's
    assert "tokens per update: 30,058 for each)" in _tie_note("forecast_cost_only", _tied(), probe, block)
