"""`gradprobe probe --rewards A --rewards B` probes A and B: argparse's default (the last one wins) dropped A without
a word (a trial user's finding)."""

import argparse

from gradprobe.cli.probe import _add_probe
from gradprobe.probe.config import ProbeConfig


def _parse(argv):
    parser = argparse.ArgumentParser()
    _add_probe(parser.add_subparsers(dest="command"))
    return parser.parse_args(["probe", *argv])


def test_rewards_given_twice_are_joined_in_order_and_the_default_stands_alone():
    assert _parse(["--rewards", "outcome", "--rewards", "mc_value,rw.py:fn"]).rewards == "outcome,mc_value,rw.py:fn"
    assert _parse(["--rewards", "mc_value"]).rewards == "mc_value"
    assert _parse([]).rewards == ",".join(ProbeConfig.rewards)
    default = ",".join(ProbeConfig.rewards)
    assert _parse(["--rewards", default, "--rewards", "x"]).rewards == f"{default},x"  # the default's text, given
