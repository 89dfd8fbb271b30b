"""A small byte-level BPE tokenizer with Gemma's special token ids and a Gemma-4-style chat template.

The real checkpoint's tokenizer has 262,144 entries; our small models use a BPE trained on the
project's own text, but keep the ids that the model code and the sampler rely on:

    0 <pad>   1 <eos>   2 <bos>   3 <unk>   4 <mask>   50 <|tool_response>
    98 <|think|>   100 <|channel>   101 <channel|>   105 <|turn>   106 <turn|>

(the other ids 5..104 are unused placeholders so these land on Gemma 4's ids).  A chat turn is

    <bos><|turn>user\n{prompt}<turn|>\n<|turn>model\n{response}<turn|>

and generation stops at `<turn|>` or `<eos>`, as for Gemma 4.

    tokenizer = train_tokenizer(texts, vocab_size=2048)
    tokenizer.save_pretrained("folder")      # AutoTokenizer.from_pretrained("folder") loads it
"""

from __future__ import annotations

from collections.abc import Iterable

PAD, EOS, BOS, UNK, MASK = "<pad>", "<eos>", "<bos>", "<unk>", "<mask>"
TOOL_RESPONSE, START_TURN, END_TURN = "<|tool_response>", "<|turn>", "<turn|>"
THINK, CHANNEL_OPEN, CHANNEL_CLOSE = "<|think|>", "<|channel>", "<channel|>"  # Gemma 4's thinking markers
PAD_ID, EOS_ID, BOS_ID, START_TURN_ID, END_TURN_ID = 0, 1, 2, 105, 106
THINK_ID, CHANNEL_OPEN_ID, CHANNEL_CLOSE_ID = 98, 100, 101
EOS_TOKEN_IDS = [EOS_ID, END_TURN_ID]  # what ends a generation (Gemma 4 also stops at 50)

# Gemma 4's turn format.  With enable_thinking=True a system turn opens with <|think|> (a system
# message's text follows it), and the model answers "<|channel>thought\n...<channel|>answer";
# without it the rendering is exactly the earlier template's, so old prompts keep their ids.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% set thinking = enable_thinking is defined and enable_thinking %}"
    "{% if thinking %}{{ '<|turn>system\n<|think|>' }}"
    "{% if messages[0]['role'] == 'system' %}{{ messages[0]['content'] | trim }}{% endif %}"
    "{{ '<turn|>\n' }}{% endif %}"
    "{% for message in messages %}"
    "{% if not (thinking and loop.first and message['role'] == 'system') %}"
    "{% set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
    "{{ '<|turn>' + role + '\n' + message['content'] | trim + '<turn|>\n' }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|turn>model\n' }}{% endif %}"
)


def special_tokens() -> list[str]:
    """Special tokens in id order: position i gets id i."""
    tokens = [f"<unused{i}>" for i in range(107)]
    named = {0: PAD, 1: EOS, 2: BOS, 3: UNK, 4: MASK, 50: TOOL_RESPONSE, THINK_ID: THINK, CHANNEL_OPEN_ID: CHANNEL_OPEN,
             CHANNEL_CLOSE_ID: CHANNEL_CLOSE, 105: START_TURN, 106: END_TURN}
    for token_id, token in named.items():
        tokens[token_id] = token
    return tokens


def train_tokenizer(texts: Iterable[str], vocab_size: int = 2048, *, isolate_capitals: bool = False,
                    space_apart: bool = False):
    """Train the byte-level BPE on `texts` and wrap it as a transformers fast tokenizer.

    With `isolate_capitals`, every capital letter (with the space before it) is a token of its
    own: "Calm waves" -> "C", "alm", " waves".  A small model then writes an acrostic by copying
    letter tokens from the prompt ("O, C, E" or "OCEANS" alike) instead of having to spell
    merged tokens it has no way to see inside.

    With `space_apart`, a space before a lowercase letter is a token of its own, so a word is split
    into the same pieces after a space and after a quote: ` salary` in a prompt and `"salary` in a
    JSON answer both give `salary`'s pieces, where byte-level BPE gives ` sal`+`ary` and
    `s`+`al`+`ary`.  English answers get longer in tokens (about 1.7x).
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = special_tokens()
    bpe = Tokenizer(models.BPE(unk_token=None, byte_fallback=False))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    splits = []
    if isolate_capitals:
        splits.append(pre_tokenizers.Split(Regex(" ?[A-Z]"), behavior="isolated"))
    if space_apart:
        splits.append(pre_tokenizers.Split(Regex(" (?=[a-z])"), behavior="isolated"))
    if splits:
        bpe.pre_tokenizer = pre_tokenizers.Sequence([*splits, bpe.pre_tokenizer])
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # every byte is encodable
        min_frequency=2,
        show_progress=False,
    )
    bpe.train_from_iterator(texts, trainer=trainer)
    for i, token in enumerate(specials):
        assert bpe.token_to_id(token) == i, f"special token {token} did not get id {i}"
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        unk_token=UNK,
        mask_token=MASK,
        additional_special_tokens=[START_TURN, END_TURN, TOOL_RESPONSE, THINK, CHANNEL_OPEN, CHANNEL_CLOSE],
        clean_up_tokenization_spaces=False,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer
