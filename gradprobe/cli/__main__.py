"""``python -m gradprobe.cli ...``: the ``gradprobe`` command."""

import sys

from . import main

sys.exit(main())
