"""``calib fit`` / ``calib report``. SKELETON: being built (issue 4)."""


def main(argv=None) -> int:
    raise NotImplementedError("calib is being built")
