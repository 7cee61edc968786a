"""gradprobe: is an RLVR training intervention worth its compute?

Two answers, as defined in ``DESIGN.md`` of the project:

* a cheap one, the *probe*: per-token alignment of each reward's policy-gradient
  update with a reference update, computed for all tokens and all rewards in one
  forward-mode pass (``torch.func.jvp``);
* an expensive one, matched-compute GRPO runs (ground truth).

Data flows one way: task -> rollouts -> rewards (advantages) -> probe or update ->
records -> analysis. Nothing runs at import time.
"""

__version__ = "0.1.0"
