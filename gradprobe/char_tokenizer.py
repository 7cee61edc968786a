"""A small character-level tokenizer for the tiny tier and for tests.

A real :class:`transformers.PreTrainedTokenizerFast` (backed by the ``tokenizers`` library)
with a ~100-token vocabulary: printable ASCII, newline, and the special tokens
``<pad>``, ``<s>`` (BOS), ``</s>`` (EOS), ``<unk>``. Pad and EOS are distinct ids, and the
chat template renders a user turn as ``<s>User: ...\\nAssistant:\\n`` so the template holds
the only BOS (the tokenizer adds none itself).

``char_tokenizer(template="compact")`` is the tokenizer of the warm-started ``tiny`` tier
(:mod:`gradprobe.tiers`). Its chat template renders a user turn as ``<s>EXPRESSION\\n``: only the
text after the last ``": "`` of the message's first paragraph, i.e. the arithmetic of a
reasoning-gym question (``"State the final answer to the following arithmetic problem: 2 + 3 =
"`` gives ``"<s>2 + 3 =\\n"``), dropping the instruction that
:func:`gradprobe.tasks.prompts.format_prompt` appends after a blank line. Why: with one token
per character the full prompt (template + question + instruction) is ~250-290 tokens, 5-7
times the ~40-token completion, so it would dominate the cost of every rollout, eval and
update; the compact prompt is ~10-20 tokens. A few-million-parameter model cannot read an
instruction anyway: it learns the output format (one step per line, ``#### answer``) from its
supervised warm start. Prompts still go through :func:`gradprobe.tasks.prompts.encode_prompt`
(the template is saved with the tier, so every caller gets the same ids).

A hint paragraph (``"Hint: ...\\n<lines>"``, :data:`gradprobe.rollout.guidance.HINT_HEADER`, put into the
question by off-context guidance) is kept: its lines follow the expression, one per line
(``"<s>3 + 3 + 6 =\\n3 + 3 = 6\\n"``), in the format of the tier's own worked solutions, so a guided
rollout continues the given steps. A prompt without a hint renders exactly as before.
"""

from __future__ import annotations

import string

CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}"
    "{% if m['role'] == 'user' %}User: {{ m['content'] }}\n{% elif m['role'] == 'system' %}{{ m['content'] }}\n"
    "{% else %}Assistant:\n{{ m['content'] }}{{ eos_token }}\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}Assistant:\n{% endif %}"
)
#: Chat template of the tiny tier: BOS, the user message's first paragraph after its last ": ",
#: a newline, then the lines of an off-context hint paragraph if there is one (see the module
#: docstring). Assistant turns are rendered as content + EOS.
COMPACT_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}"
    "{% if m['role'] == 'user' %}{% set paragraphs = m['content'].split('\n\n') %}"
    "{{ paragraphs[0].split(': ')[-1] }}\n"
    "{% for p in paragraphs[1:] %}{% if p.startswith('Hint: ') and '\n' in p %}{{ p.split('\n', 1)[1] }}\n"
    "{% endif %}{% endfor %}"
    "{% elif m['role'] == 'assistant' %}{{ m['content'] }}{{ eos_token }}\n{% endif %}{% endfor %}"
)
TEMPLATES = {"chat": CHAT_TEMPLATE, "compact": COMPACT_CHAT_TEMPLATE}
SPECIAL_TOKENS = ["<pad>", "<s>", "</s>", "<unk>"]


def char_tokenizer(template: str = "chat"):
    """Build the character-level tokenizer.

    Parameters
    ----------
    template : {"chat", "compact"}
        Chat template: :data:`CHAT_TEMPLATE` (``User: ...`` / ``Assistant:``, the full
        instruction prompt) or :data:`COMPACT_CHAT_TEMPLATE` (the tiny tier's: only the
        arithmetic expression of the question).

    Returns
    -------
    transformers.PreTrainedTokenizerFast
        ``pad_token_id`` 0, ``bos_token_id`` 1, ``eos_token_id`` 2, ``unk_token_id`` 3; one
        token per character of ``string.printable`` (minus ``\\r``, ``\\x0b``, ``\\x0c``).

    Raises
    ------
    ValueError
        Unknown ``template`` (the message lists the valid ones).
    """
    if template not in TEMPLATES:
        raise ValueError(f"unknown chat template {template!r}; valid: {', '.join(TEMPLATES)}")
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders
    from transformers import PreTrainedTokenizerFast

    chars = [c for c in string.printable if c not in "\r\x0b\x0c"]
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    for c in chars:
        vocab.setdefault(c, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(pattern="", behavior="isolated")
    tok.decoder = decoders.Fuse()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        padding_side="left",
    )
    fast.chat_template = TEMPLATES[template]
    return fast
