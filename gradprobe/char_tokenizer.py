"""A small character-level tokenizer for the tiny tier and for tests.

A real :class:`transformers.PreTrainedTokenizerFast` (backed by the ``tokenizers`` library)
with a ~100-token vocabulary: printable ASCII, newline, and the special tokens
``<pad>``, ``<s>`` (BOS), ``</s>`` (EOS), ``<unk>``. Pad and EOS are distinct ids, and the
chat template renders a user turn as ``<s>User: ...\\nAssistant:\\n`` so the template holds
the only BOS (the tokenizer adds none itself).
"""

from __future__ import annotations

import string

CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}"
    "{% if m['role'] == 'user' %}User: {{ m['content'] }}\n{% elif m['role'] == 'system' %}{{ m['content'] }}\n"
    "{% else %}Assistant:\n{{ m['content'] }}{{ eos_token }}\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}Assistant:\n{% endif %}"
)
SPECIAL_TOKENS = ["<pad>", "<s>", "</s>", "<unk>"]


def char_tokenizer():
    """Build the character-level tokenizer.

    Returns
    -------
    transformers.PreTrainedTokenizerFast
        ``pad_token_id`` 0, ``bos_token_id`` 1, ``eos_token_id`` 2, ``unk_token_id`` 3; one
        token per character of ``string.printable`` (minus ``\\r``, ``\\x0b``, ``\\x0c``).
    """
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
    fast.chat_template = CHAT_TEMPLATE
    return fast
