"""A chat template that drops the hint, for the guidance refusals' tests.

The tiny tiers' compact template once rendered only the arithmetic expression of the user message's
first paragraph, so a hinted prompt encoded to the plain prompt's ids; it now keeps a hint paragraph
(:mod:`gradprobe.char_tokenizer`). This tokenizer keeps the old behaviour so that the refusal of a
model that cannot read its hint stays tested.
"""

from gradprobe.char_tokenizer import char_tokenizer

FIRST_PARAGRAPH_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}"
    "{% if m['role'] == 'user' %}{{ m['content'].split('\n\n')[0].split(': ')[-1] }}\n"
    "{% elif m['role'] == 'assistant' %}{{ m['content'] }}{{ eos_token }}\n{% endif %}{% endfor %}"
)


def hint_dropping_tokenizer():
    """The character tokenizer with :data:`FIRST_PARAGRAPH_TEMPLATE` (renders the first paragraph's expression only)."""
    tok = char_tokenizer("compact")
    tok.chat_template = FIRST_PARAGRAPH_TEMPLATE
    return tok
