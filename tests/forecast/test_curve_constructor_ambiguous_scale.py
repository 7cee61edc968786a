"""The :class:`ReferenceCurve` constructor's ``accuracy_scale="auto"`` refuses accuracies whose largest lies in
(1, 5], as the file readers do (:func:`gradprobe.forecast.accuracy_values.read_points`): accuracy points of a curve
under 5%, or another metric on a small scale (a sum of 0/1 rewards), cannot be told apart, and read as points the
second gives a wrong verdict. The fix the message names, ``accuracy_scale='points'``, builds the curve."""

from __future__ import annotations

import numpy as np
import pytest

from gradprobe.forecast.accuracy_values import read_points
from gradprobe.forecast.curves import CurveError, ReferenceCurve

UPDATES = [0, 10, 20, 40, 80, 160]
REWARD_SUM = [1.2, 1.6, 1.9, 2.1, 2.25, 2.31]  # three 0/1 rewards summed: no accuracy


def test_constructor_refuses_values_whose_scale_cannot_be_told():
    with pytest.raises(CurveError) as info:
        ReferenceCurve(updates=UPDATES, accuracy=REWARD_SUM)
    assert str(info.value) == (
        "ReferenceCurve(accuracy=...): accuracy values range 1.2-2.31 (the largest at accuracy[5]), above 1 (so no "
        "fractions) but no higher than 5, so their scale cannot be told: accuracy points of a curve that never passes "
        "5%, or another metric on a small scale (a sum of several 0/1 rewards, a 1-5 score, a loss), which read as "
        "points would give a wrong verdict; if they are accuracy points, pass accuracy_scale='points'; if not, read "
        "the key or column that holds the held-out accuracy")
    # the readers' message, less the command line's option (no fix for a caller of the constructor)
    with pytest.raises(CurveError) as reader:
        read_points(np.array(REWARD_SUM), "auto", "ReferenceCurve(accuracy=...)",
                    [f"accuracy[{i}]" for i in range(len(REWARD_SUM))])
    assert str(reader.value).replace(" (on the command line, --reference-curve-scale points)", "") == str(info.value)
    with pytest.raises(CurveError, match=r"range 0\.4-5 \(the largest at accuracy\[2\]\)"):  # 5 itself: refused
        ReferenceCurve(updates=[0, 10, 20, 40], accuracy=[0.4, 2.0, 5.0, 4.5], seeds=[0, 0, 0, 0])
    # the fix named builds the curve; other ranges read as before
    points = ReferenceCurve(updates=UPDATES, accuracy=REWARD_SUM, accuracy_scale="points", n_replicates=0)
    assert points.params["R0"] == 1.2 and 2.2 < points.params["A"] < 2.6  # points as given, no note
    assert list(points.points["accuracy"]) == REWARD_SUM and not any("read as" in x for x in points.notes)
    above = ReferenceCurve(updates=UPDATES, accuracy=[0.4, 1.5, 3.0, 4.5, 5.5, 6.0], n_replicates=0)
    assert above.points["accuracy"].max() == 6.0  # a hard task's curve past 5 points: points, as the readers read it
    fractions = ReferenceCurve(updates=UPDATES, accuracy=[v / 100 for v in (60, 66, 70, 73, 75, 76)], n_replicates=0)
    assert fractions.points["accuracy"].tolist() == pytest.approx([60, 66, 70, 73, 75, 76], rel=1e-12)
