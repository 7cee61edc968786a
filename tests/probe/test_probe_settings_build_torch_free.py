"""Building a probe configuration loads no torch: the loss types are checked against the torch-free names
(gradprobe.config.LOSS_TYPE_NAMES); only a name outside them consults the live registry."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gradprobe.config import LOSS_TYPE_NAMES
from gradprobe.probe_settings import ProbeConfig


def test_building_a_config_with_every_builtin_loss_type_loads_no_torch():
    code = ("import sys\nfrom gradprobe.probe_settings import ProbeConfig\n"
            "c = ProbeConfig()\nd = ProbeConfig.from_dict(dict(loss_type='dapo', loss_types='grpo,dr_grpo,gspo'))\n"
            "print(c.update.loss_type, ','.join(d.update.all_loss_types), 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["grpo", "dapo,grpo,dr_grpo,gspo", "False"]


@pytest.mark.parametrize("settings,field", [(dict(loss_type="grpo2"), "loss_type (--loss-type) 'grpo2'"),
                                            (dict(loss_types="dapo,foo"), "loss_types (--loss-types) 'foo'")])
def test_an_unknown_loss_type_is_named_with_the_valid_names(settings, field):
    with pytest.raises(ValueError) as err:
        ProbeConfig.from_dict(settings)
    message = str(err.value)
    assert field in message
    assert ", ".join(sorted(LOSS_TYPE_NAMES)) in message  # every valid name, sorted
