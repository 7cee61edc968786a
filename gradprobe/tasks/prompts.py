"""Prompt text and prompt token ids, with exactly one BOS.

Chat templates often write the BOS token into the text (Llama 3:
``<|begin_of_text|>``); tokenizing that text with the default
``add_special_tokens=True`` then adds a second BOS. The contract here:

- :func:`format_prompt` returns text. Callers that tokenize it themselves must
  use ``add_special_tokens=False``.
- :func:`encode_prompt` returns the ids to feed the model: the text tokenized
  with ``add_special_tokens=False``, then, if the tokenizer normally prepends a
  BOS (probed by encoding a short string both ways) and the text did not
  already start with it, that BOS is prepended; repeated leading BOS ids are
  collapsed to one. Tokenizers without a BOS (Qwen) get none.

Without a chat template the prompt is plain text ending in ``"Answer:\\n"``.
"""

from __future__ import annotations

from .base import PYTHON_SURROGATE_FIX, unencodable_text

__all__ = ["INSTRUCTION", "format_prompt", "encode_prompt", "encode_prompts", "tokenizer_adds_bos"]

INSTRUCTION = (
    "Solve the problem step by step. Write one reasoning step per line. "
    'On the last line write only "####" followed by the final answer.\n'
    "Example: for 2 + 5 - 1, write\n2 + 5 = 7\n7 - 1 = 6\n#### 6"
)


def format_prompt(tokenizer, question: str) -> str:
    """Build the prompt text for one question.

    Parameters
    ----------
    tokenizer : transformers tokenizer or None
        If it has a ``chat_template``, the question and :data:`INSTRUCTION` go
        in one user message rendered with ``apply_chat_template(...,
        add_generation_prompt=True, tokenize=False)``. Otherwise (or None) the
        plain format ``"<INSTRUCTION>\\n\\nQuestion: <question>\\nAnswer:\\n"``.
    question : str
        The problem text (``Problem.question``).

    Returns
    -------
    str
        Prompt text; tokenize it with ``add_special_tokens=False``, or use
        :func:`encode_prompt`.

    A question that is a :class:`gradprobe.tasks.dataset.PromptText` (your own data, TRL's prompt
    formats) is rendered as it says: ``plain`` verbatim, ``conversational`` its messages through the
    chat template (with the generation prompt), ``question`` as above with its own instruction.

    Raises
    ------
    ValueError
        A conversational prompt and a tokenizer without a chat template.
    """
    kind = getattr(question, "prompt_format", "question")
    if kind == "plain":
        return str(question)
    if kind == "conversational":
        if tokenizer is None or not getattr(tokenizer, "chat_template", None):
            raise ValueError("a conversational prompt (TRL's list of messages) needs a model whose tokenizer has a "
                             "chat template; use a chat model, or map a plain prompt or a bare question "
                             "(question=COLUMN) instead")
        return tokenizer.apply_chat_template([dict(m) for m in question.messages], add_generation_prompt=True,
                                             tokenize=False)
    instruction = getattr(question, "instruction", None) or INSTRUCTION
    if tokenizer is not None and getattr(tokenizer, "chat_template", None):
        messages = [{"role": "user", "content": f"{question}\n\n{instruction}"}]
        return tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=False
        )
    return f"{instruction}\n\nQuestion: {question}\nAnswer:\n"


def tokenizer_adds_bos(tokenizer) -> bool:
    """Whether ``tokenizer(..., add_special_tokens=True)`` prepends its BOS token.

    Parameters
    ----------
    tokenizer : transformers tokenizer

    Returns
    -------
    bool
        False when the tokenizer has no BOS token.
    """
    bos = getattr(tokenizer, "bos_token_id", None)
    if bos is None:
        return False
    with_special = tokenizer.encode("a", add_special_tokens=True)
    plain = tokenizer.encode("a", add_special_tokens=False)
    return len(with_special) > len(plain) and with_special[0] == bos


def encode_prompt(tokenizer, question: str) -> list[int]:
    """Token ids of :func:`format_prompt`, with exactly one BOS when the model uses one.

    Parameters
    ----------
    tokenizer : transformers tokenizer
    question : str

    Returns
    -------
    list of int
        Prompt ids, length P (no padding, no EOS).

    Raises
    ------
    ValueError
        As :func:`format_prompt`; or the prompt holds an unpaired UTF-16 surrogate (e.g. ``"\\ud800"``), which no
        tokenizer can encode (a ``tokenizers`` one raises a bare TypeError): the message names the question, the
        character and the fix (:func:`_refuse_unencodable`).
    """
    text = format_prompt(tokenizer, question)
    try:
        ids = list(tokenizer.encode(text, add_special_tokens=False))
    except Exception:
        _refuse_unencodable([text], [question])
        raise
    return _one_bos(ids, tokenizer, None)


def encode_prompts(tokenizer, questions) -> list[list[int]]:
    """:func:`encode_prompt` of every question, the same ids, with one batched tokenizer call for a fast
    (``tokenizers``-backed) tokenizer and the BOS probe (:func:`tokenizer_adds_bos`) made once: a whole prompt
    pool (thousands of prompts) is encoded for a length check at a run's setup without a call per prompt.

    Parameters
    ----------
    tokenizer : transformers tokenizer
        A fast one is called once for all (``tokenizer(texts, add_special_tokens=False)``); any other tokenizer
        (or test double) is asked per prompt, as :func:`encode_prompt` asks it.
    questions : sequence of str
        The problems' questions (``Problem.question``, a :class:`~gradprobe.tasks.dataset.PromptText` too).

    Returns
    -------
    list of list of int
        One prompt's ids per question, in order (no padding, no EOS).

    Raises
    ------
    ValueError
        As :func:`format_prompt` (a conversational prompt and a tokenizer without a chat template); or the first
        prompt that holds an unpaired UTF-16 surrogate, named by its place and question, with the fix
        (:func:`encode_prompt`).
    """
    questions = list(questions)
    texts = [format_prompt(tokenizer, q) for q in questions]
    if not texts:
        return []
    try:
        if getattr(tokenizer, "is_fast", False):
            encoded = [list(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]
        else:
            encoded = [list(tokenizer.encode(t, add_special_tokens=False)) for t in texts]
    except Exception:
        _refuse_unencodable(texts, questions)
        raise
    adds = tokenizer_adds_bos(tokenizer)
    return [_one_bos(ids, tokenizer, adds) for ids in encoded]


def _refuse_unencodable(texts: list, questions: list) -> None:
    """Raise the ValueError that says why the tokenizer failed when one of ``texts`` (the prompts of
    ``questions``) is not UTF-8 text (:func:`gradprobe.tasks.base.unencodable_text`); return when none is, so the
    tokenizer's own error passes unchanged. Checked only after a failure: a prompt pool's encoding costs nothing
    more."""
    for i, (text, question) in enumerate(zip(texts, questions)):
        parts = [("'question'", str(question)), ("'question'.messages", getattr(question, "messages", None)),
                 ("'question'.instruction", getattr(question, "instruction", None)), ("'prompt'", str(text))]
        if why := next(filter(None, (unencodable_text(v, k, PYTHON_SURROGATE_FIX) for k, v in parts)), None):
            where = f"prompt {i} of {len(texts)}" if len(texts) > 1 else "the prompt"
            raise ValueError(f"{where} (question {ascii(str(question)[:60])}) cannot be encoded: {why}") from None


def _one_bos(ids: list[int], tokenizer, adds_bos: bool | None) -> list[int]:
    """``ids`` with exactly one leading BOS when the tokenizer prepends one (``adds_bos``; None: probed here,
    :func:`tokenizer_adds_bos`): repeated leading BOS ids collapsed, a missing one prepended; unchanged for a
    tokenizer without a BOS."""
    bos = getattr(tokenizer, "bos_token_id", None)
    if bos is None:
        return ids
    while len(ids) >= 2 and ids[0] == bos and ids[1] == bos:
        ids.pop(0)
    if (tokenizer_adds_bos(tokenizer) if adds_bos is None else adds_bos) and (not ids or ids[0] != bos):
        ids.insert(0, bos)
    return ids
