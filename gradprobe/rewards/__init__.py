"""Rewards: rollouts -> per-token advantages (N, T) (DESIGN.md, "Rewards and per-token advantages").

``base``      registry (:func:`register_reward`, :func:`get_reward`, :func:`parse_rewards`),
              :class:`RewardContext`, :class:`RewardOutput`;
``outcome``   GRPO outcome reward (``outcome``, ``outcome_batch``, ``outcome_dr``); the advantage
              scale is a ``scale=`` parameter of each function (no module-wide setting);
``steps``     MC step values shared by the dense rewards (one batched sampling call, cached);
``dense``     ``mc_value``, ``mc_advantage``, ``hybrid[_0.9|_0.5|_0.1]``, ``mc_min``;
``sequence``  TRL-signature user rewards (:func:`sequence_reward`);
``process``   step-verifier process rewards without continuations (``process``,
              ``process_hybrid[_0.9|_0.5|_0.1]``); their parts: ``verifiers`` (line verifiers
              and their registry by task kind, chain sums), ``arithmetic`` (the GSM8K verifier),
              ``step_checks`` (a batch's step verdicts -> advantages), ``fidelity``
              (trace-fidelity metrics of evaluations);
``prm``       a Hugging Face classification model as process reward model (:func:`prm_reward`);
``majority``  label-free majority vote with answer-span masking (``majority_vote``, TTRL);
``counterfactual``  outcome with a leave-one-out baseline (``outcome_loo``, RLOO).
"""

from .base import (REWARDS, Reward, RewardContext, RewardFunctionError, RewardOutput, UnknownRewardError,
                   get_reward, parse_rewards, register_reward)
from .outcome import normalize_sequence_rewards, outcome_reward
from .steps import MissingSamplerError, StepValues, mc_step_values, split_steps
from .dense import (hybrid_advantages, mc_advantage_advantages, mc_min_rewards, mc_value_advantages)
from .sequence import sequence_reward, trl_columns
from .verifiers import STEP_VERIFIERS, UnknownTaskKindError, chain_sum_line, register_step_verifier
from .arithmetic import arithmetic_line
from .process import make_process_reward
from .fidelity import trace_fidelity
from .prm import NotAClassificationModelError, prm_reward
from .majority import answer_span_mask, majority_vote_rewards
from .counterfactual import loo_advantages, outcome_loo_reward
from .plugin import is_plugin_name, load_reward_plugin

__all__ = ["REWARDS", "Reward", "RewardContext", "RewardFunctionError", "RewardOutput", "UnknownRewardError",
           "get_reward", "parse_rewards", "register_reward", "normalize_sequence_rewards",
           "outcome_reward", "MissingSamplerError", "StepValues", "mc_step_values", "split_steps",
           "hybrid_advantages", "mc_advantage_advantages", "mc_min_rewards", "mc_value_advantages",
           "sequence_reward", "trl_columns", "STEP_VERIFIERS", "UnknownTaskKindError", "arithmetic_line",
           "chain_sum_line", "make_process_reward", "register_step_verifier", "trace_fidelity",
           "NotAClassificationModelError", "prm_reward", "answer_span_mask", "majority_vote_rewards",
           "loo_advantages", "outcome_loo_reward", "is_plugin_name", "load_reward_plugin"]
