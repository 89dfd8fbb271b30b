"""Training data for the built-in model: task text -> token ids -> (context, block) examples.

A task becomes one example per 256-token block of its response: the context is the chat
prompt (exactly what `apply_chat_template(..., add_generation_prompt=True)` gives at inference)
plus the response's earlier blocks, and the block holds the next `canvas_length` response ids.
The response ends with `<turn|>` (id 106); `collate` fills the rest of the canvas with `<eos>`
(id 1), as the real model's canvases end.

    tokenizer = build_tokenizer(seed=0)                         # BPE trained on the task mix
    parts = TaskBatches(tokenizer_dir, 256, seed=1)[0]          # batch 0 of a run: [collated numpy arrays]
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from backends.small_models import CANVAS_LENGTH
from prompts.demos import DEMOS
from prompts.tasks import ENGLISH_FAMILIES, FAMILIES, TEMPLATE_FAMILIES, Task, sample_tasks

from .tokenizer import END_TURN_ID, EOS_ID, PAD_ID, train_tokenizer

# How often each family appears in the training mix (1 = average, families left out weigh 1); four
# corpora join the generated families: "docs" (Python's glossary and FAQ, training/corpus.py),
# "wordnet" (everyday definitions, training/wordnet.py), "open_subjects" (the question shapes asked
# about WordNet's nouns, wordnet.open_subject_tasks) and "wordnet_keys" (visitor JSON whose keys are
# built from WordNet's nouns, wordnet.json_key_tasks).  A corpus left out weighs 0.
DOCS, WORDNET, OPEN_SUBJECTS, WORDNET_KEYS = "docs", "wordnet", "open_subjects", "wordnet_keys"
CORPORA = (DOCS, WORDNET, OPEN_SUBJECTS, WORDNET_KEYS)
# Families added after a mix was used weigh 0 in it, so a named mix still means what it trained.
_LATER_ENGLISH = {"why": 0.0, "how": 0.0, "tips": 0.0, "good": 0.0, "favorite": 0.0, "suggest": 0.0, WORDNET: 0.0}
_LATER_DRILLS = {"math_drill": 0.0, "json_key_drill": 0.0}
# An earlier model's last two stages (the first visitor stages of issue 14), and the training default.
FAMILY_WEIGHTS = {
    "math": 2.0, "acrostic": 1.5, "json": 2.0, "json_paraphrase": 5.0, "math_paraphrase": 4.0,
    "acrostic_paraphrase": 4.0, "describe": 1.5, "explain": 1.0, "poem": 1.5, DOCS: 1.0, "thinking": 0.75,
    "sentences": 0.4, "doctest_function": 0.5, "fact_list": 0.4, "story": 0.4, "haiku": 0.4, "code_function": 0.3,
    "code_task": 0.5, "factual": 0.5, "open": 0.4, **_LATER_ENGLISH, **_LATER_DRILLS,
}
# An earlier model's first stage: the twelve template families (nothing else existed then).
BASE_FAMILY_WEIGHTS = {
    **{f: 0.0 for f in FAMILIES if f not in TEMPLATE_FAMILIES}, DOCS: 0.0, WORDNET: 0.0,
    "math": 2.5, "acrostic": 2.5, "json": 2.0, "doctest_function": 1.25, "open": 0.75, "story": 0.75,
}
# Tried for issue 14, not shipped (experiments/README.md, "One mix from scratch"): one 18.5-minute run from
# scratch on this mix.
ONE_MIX_FAMILY_WEIGHTS = {
    "math": 2.0, "acrostic": 1.5, "json": 2.5, "json_paraphrase": 5.0, "math_paraphrase": 4.5,
    "acrostic_paraphrase": 3.0, "describe": 2.0, "explain": 1.75, "poem": 1.5, DOCS: 0.4, "thinking": 0.75,
    "sentences": 0.5, "doctest_function": 0.6, "fact_list": 0.5, "story": 0.5, "haiku": 0.5, "code_function": 0.35,
    "code_task": 0.5, "factual": 0.5, "open": 0.4, **_LATER_ENGLISH, **_LATER_DRILLS,
}
# Tried for issue 14, not shipped (experiments/README.md, "Open word pools and question shapes"): one 20.5-minute run
# from scratch with the open-vocabulary paraphrases, the English question shapes and WordNet.
OPEN_MIX_FAMILY_WEIGHTS = {
    "math": 2.0, "acrostic": 1.5, "json": 2.0, "doctest_function": 1.0, "sentences": 1.0, "fact_list": 1.0,
    "story": 0.8, "haiku": 0.8, "code_function": 0.4, "code_task": 0.6, "factual": 0.6, "open": 0.4,
    "json_paraphrase": 6.0, "math_paraphrase": 5.0, "acrostic_paraphrase": 3.0,
    "describe": 1.5, "explain": 1.0, "poem": 1.0, "why": 1.0, "how": 1.0, "tips": 0.6, "good": 0.5, "favorite": 0.4,
    "suggest": 0.4, WORDNET: 2.0, DOCS: 0.6, "thinking": 0.6, **_LATER_DRILLS,
}
# The open mix with more arithmetic and acrostics, for a run on short canvases (`--short-canvas 64`,
# which makes the short families cheap): the open-mix run learnt arithmetic worst (34% on templates).
OPEN_MIX_2_FAMILY_WEIGHTS = {**OPEN_MIX_FAMILY_WEIGHTS, "math": 3.0, "math_paraphrase": 7.0, "acrostic_paraphrase": 4.0,
                             DOCS: 0.4, "thinking": 0.5}
# Open-mix-2 with more JSON: tried for issue 14 with worked arithmetic, not shipped (experiments/README.md, "Worked
# arithmetic"; experiments/2026-11-25-worked-math/).
OPEN_MIX_3_FAMILY_WEIGHTS = {**OPEN_MIX_2_FAMILY_WEIGHTS, "json_paraphrase": 8.0, "json": 2.5}
# A short fine-tune after open-mix-2 (the model shipped until 2026-11-25): the visitor JSON and arithmetic it left
# furthest from their goals.
JSON_MATH_FINETUNE_WEIGHTS = {**OPEN_MIX_2_FAMILY_WEIGHTS, "json_paraphrase": 12.0, "math_paraphrase": 12.0, "json": 4.0,
                              "math": 4.0}
# The first two stages of the model shipped until 2026-11-26: open-mix-3 with arithmetic worksheets
# (prompts/tasks/drills.py: five to eight sums per answer, so the ~6,000 facts of the visitors' range each
# come up hundreds of times in a run), then a fine-tune with JSON, arithmetic and the worksheets weighed up.
OPEN_MIX_4_FAMILY_WEIGHTS = {**OPEN_MIX_3_FAMILY_WEIGHTS, "math_drill": 3.0}
DRILL_FINETUNE_WEIGHTS = {**JSON_MATH_FINETUNE_WEIGHTS, "json_paraphrase": 14.0, "json": 5.0, "math_drill": 5.0}
# A short third stage after drill-finetune, tried and not shipped (experiments/README.md, "A third stage of unseen
# JSON keys"): JSON with many keys the model cannot recall, so it copies them.
KEY_DRILL_FINETUNE_WEIGHTS = {**DRILL_FINETUNE_WEIGHTS, "json_key_drill": 12.0}
# That model's third stage, after drill-finetune: with the --space-apart tokenizer the first two stages left
# arithmetic behind (74% on templates), so the worksheets and visitor sums are weighed up, the JSON templates a little.
MATH_FINETUNE_WEIGHTS = {**DRILL_FINETUNE_WEIGHTS, "math_drill": 12.0, "math_paraphrase": 16.0, "math": 6.0, "json": 6.0}
# Third-stage alternatives to math-finetune, tried for issue 14 (experiments/2026-11-25-gather-retrain/):
# after 21% more steps a stage, math-finetune left arithmetic far above its goal and JSON and acrostics below
# theirs, so these move weight from the sums to the visitor JSON and acrostics, a little (balance) or more.
BALANCE_FINETUNE_WEIGHTS = {**MATH_FINETUNE_WEIGHTS, "json_paraphrase": 18.0, "acrostic_paraphrase": 7.0,
                            "math_paraphrase": 14.0, "math_drill": 9.0, "math": 5.0}
JSON_ACROSTIC_FINETUNE_WEIGHTS = {**MATH_FINETUNE_WEIGHTS, "json_paraphrase": 20.0, "acrostic_paraphrase": 8.0,
                                  "acrostic": 3.0, "math_paraphrase": 10.0, "math_drill": 6.0, "math": 4.0}
# That recipe's three stages with the question shapes asked about any of WordNet's nouns added
# (open subjects: the closed subject lists let the model answer about a recalled subject, not the asked one).
OPEN_MIX_5_FAMILY_WEIGHTS = {**OPEN_MIX_4_FAMILY_WEIGHTS, OPEN_SUBJECTS: 2.0}
DRILL_FINETUNE_5_WEIGHTS = {**DRILL_FINETUNE_WEIGHTS, OPEN_SUBJECTS: 2.0}
MATH_FINETUNE_5_WEIGHTS = {**MATH_FINETUNE_WEIGHTS, OPEN_SUBJECTS: 2.0}
# That recipe's three stages with the visitor JSON's built keys taken from WordNet's nouns, for half
# of it ("-6") or all of it ("-7", the shipped model's first three stages): every other family keeps its share.
def _json_keys_from_wordnet(weights: dict[str, float], share: float) -> dict[str, float]:
    json_weight = weights["json_paraphrase"]
    return {**weights, "json_paraphrase": json_weight * (1 - share), WORDNET_KEYS: json_weight * share}


OPEN_MIX_6_FAMILY_WEIGHTS = _json_keys_from_wordnet(OPEN_MIX_4_FAMILY_WEIGHTS, 0.5)
DRILL_FINETUNE_6_WEIGHTS = _json_keys_from_wordnet(DRILL_FINETUNE_WEIGHTS, 0.5)
MATH_FINETUNE_6_WEIGHTS = _json_keys_from_wordnet(MATH_FINETUNE_WEIGHTS, 0.5)
OPEN_MIX_7_FAMILY_WEIGHTS = _json_keys_from_wordnet(OPEN_MIX_4_FAMILY_WEIGHTS, 1.0)
DRILL_FINETUNE_7_WEIGHTS = _json_keys_from_wordnet(DRILL_FINETUNE_WEIGHTS, 1.0)
MATH_FINETUNE_7_WEIGHTS = _json_keys_from_wordnet(MATH_FINETUNE_WEIGHTS, 1.0)
# The shipped model's fourth stage, after the "-7" ones (experiments/2026-11-25-wordnet-keys/): they met
# the JSON goals (98% / 90%) and fell under the arithmetic and acrostic ones, so JSON gives up some weight to the
# acrostics.
MATH_ACROSTIC_FINETUNE_7_WEIGHTS = {**MATH_FINETUNE_7_WEIGHTS, WORDNET_KEYS: 10.0, "json": 4.0,
                                    "acrostic_paraphrase": 10.0, "acrostic": 4.0}
# Two variants of it, tried and not shipped (same experiment: off-family answers a little better, visitor arithmetic
# under its goal), that weigh up what the off-family prompts lean on, left at a tenth of the tasks by the fourth
# stage: the nine English question shapes doubled ("english"), or every family outside the visitor tasks ("general").
_VISITOR_TASKS = ("math", "math_paraphrase", "math_drill", "acrostic", "acrostic_paraphrase", "json", "json_paraphrase",
                  WORDNET_KEYS)
ENGLISH_FINETUNE_7_WEIGHTS = {**MATH_ACROSTIC_FINETUNE_7_WEIGHTS,
                              **{f: 2 * MATH_ACROSTIC_FINETUNE_7_WEIGHTS[f] for f in ENGLISH_FAMILIES}}
GENERAL_FINETUNE_7_WEIGHTS = {f: w if f in _VISITOR_TASKS else 2 * w
                              for f, w in MATH_ACROSTIC_FINETUNE_7_WEIGHTS.items()}
# The shipped model's fourth stage, at 5e-4 (fourF, same experiment): the English variant with the visitor sums weighed
# up too (1.5 times the visitor arithmetic and worksheets; the JSON templates, far above their goal, halved). The lower
# learning rate kept more of the first stages' English (fourB: 8 of 20 off-family answers fluent, fourA 5) and fewer
# sums (75%, fourA 81.7%), so the sums get more weight.
ENGLISH_MATH_FINETUNE_7_WEIGHTS = {**ENGLISH_FINETUNE_7_WEIGHTS, "math_paraphrase": 24.0, "math_drill": 18.0,
                                   "json": 2.0}
NAMED_MIXES = {"base": BASE_FAMILY_WEIGHTS, "visitor": FAMILY_WEIGHTS, "one-mix": ONE_MIX_FAMILY_WEIGHTS,
               "open-mix": OPEN_MIX_FAMILY_WEIGHTS, "open-mix-2": OPEN_MIX_2_FAMILY_WEIGHTS,
               "open-mix-3": OPEN_MIX_3_FAMILY_WEIGHTS, "json-math-finetune": JSON_MATH_FINETUNE_WEIGHTS,
               "open-mix-4": OPEN_MIX_4_FAMILY_WEIGHTS, "drill-finetune": DRILL_FINETUNE_WEIGHTS,
               "key-drill-finetune": KEY_DRILL_FINETUNE_WEIGHTS, "math-finetune": MATH_FINETUNE_WEIGHTS,
               "balance-finetune": BALANCE_FINETUNE_WEIGHTS, "json-acrostic-finetune": JSON_ACROSTIC_FINETUNE_WEIGHTS,
               "open-mix-5": OPEN_MIX_5_FAMILY_WEIGHTS, "drill-finetune-5": DRILL_FINETUNE_5_WEIGHTS,
               "math-finetune-5": MATH_FINETUNE_5_WEIGHTS, "open-mix-6": OPEN_MIX_6_FAMILY_WEIGHTS,
               "drill-finetune-6": DRILL_FINETUNE_6_WEIGHTS, "math-finetune-6": MATH_FINETUNE_6_WEIGHTS,
               "open-mix-7": OPEN_MIX_7_FAMILY_WEIGHTS, "drill-finetune-7": DRILL_FINETUNE_7_WEIGHTS,
               "math-finetune-7": MATH_FINETUNE_7_WEIGHTS, "math-acrostic-finetune-7": MATH_ACROSTIC_FINETUNE_7_WEIGHTS,
               "english-finetune-7": ENGLISH_FINETUNE_7_WEIGHTS, "general-finetune-7": GENERAL_FINETUNE_7_WEIGHTS,
               "english-math-finetune-7": ENGLISH_MATH_FINETUNE_7_WEIGHTS}
# The tokenizer's training texts: the template families (the shipped tokenizer's), or every generated
# family ("all", tried for issue 14; not the corpora, which CI does not have).
TOKENIZER_FAMILY_WEIGHTS = {"math": 2.0, "acrostic": 1.5, "json": 1.5, "doctest_function": 1.25}
TOKENIZER_TEXTS = 60_000  # tasks the BPE is trained on
TOKENIZER_MIXES = {
    "template": (TEMPLATE_FAMILIES, TOKENIZER_FAMILY_WEIGHTS),
    "all": (FAMILIES, {**TOKENIZER_FAMILY_WEIGHTS, **_LATER_DRILLS, "json_paraphrase": 2.0, "math_paraphrase": 1.5,
                       "acrostic_paraphrase": 1.5, "describe": 1.5, "explain": 1.5, "poem": 1.5, "why": 1.5, "how": 1.5}),
}
# With a short canvas, the share of a batch's rows on the full one: every block too long for the short
# canvas, then short ones drawn at random (about one in five), so the model keeps seeing short answers
# on the canvas it is sampled on (TaskBatches).
FULL_CANVAS_SHARE = 0.3
CONTEXT_MULTIPLE = 16  # contexts are padded to a multiple of this: few distinct shapes, see collate
VOCAB_SIZE = 4096  # small: the sampler draws 256 x vocab every step on the CPU


@dataclass(frozen=True)
class Example:
    context: np.ndarray  # int32 (L,): chat prompt ids + earlier response blocks
    block: np.ndarray  # int32 (<= canvas_length,): the target ids of this block, <turn|> included


def build_tokenizer(
    *, seed: int = 0, count: int = TOKENIZER_TEXTS, vocab_size: int = VOCAB_SIZE, isolate_capitals: bool = True,
    mix: str = "all", whole_numbers: int = 200, space_apart: bool = True,
):
    """Train the byte-level BPE on prompts and responses of the training mix (and the demo prompts).

    With `whole_numbers`, every number below it is made frequent enough to become one token (with and
    without a space before), so the parallel sampler writes an arithmetic answer as one token.  (Tried too: one token per digit, as Gemma's tokenizer has; the sampler then
    commits a sum's digits in the same step, each on its own, and template arithmetic fell from 100%
    to 24% in a 16.6-minute run.)
    """
    families, weights = TOKENIZER_MIXES[mix]
    tasks = sample_tasks(count, seed=seed, weights=weights, families=families)
    texts = [t.prompt for t in tasks] + [t.response for t in tasks] + [d.prompt for d in DEMOS]
    if whole_numbers:
        texts += [" ".join(map(str, range(whole_numbers))), "\n".join(map(str, range(whole_numbers)))] * 200
    return train_tokenizer(texts, vocab_size=vocab_size, isolate_capitals=isolate_capitals, space_apart=space_apart)


def prompt_ids_batch(tokenizer, prompts: list[str], *, enable_thinking: bool = False) -> list[list[int]]:
    """Chat-template ids of many user prompts, generation prompt added (as the backend does)."""
    if not prompts:
        return []
    conversations = [[{"role": "user", "content": p}] for p in prompts]
    out = tokenizer.apply_chat_template(conversations, add_generation_prompt=True, tokenize=True,
                                        enable_thinking=enable_thinking)
    if hasattr(out, "keys"):
        out = out["input_ids"]
    return [list(map(int, ids)) for ids in out]


def encode_tasks(tokenizer, tasks: list[Task], *, canvas_length: int = CANVAS_LENGTH) -> list[Example]:
    """One Example per canvas-length block of each response; block k sees blocks < k as clean context."""
    thinking = prompt_ids_batch(tokenizer, [t.prompt for t in tasks if t.thinking], enable_thinking=True)
    plain = prompt_ids_batch(tokenizer, [t.prompt for t in tasks if not t.thinking])
    thinking, plain = iter(thinking), iter(plain)
    prompts = [next(thinking) if t.thinking else next(plain) for t in tasks]
    responses = tokenizer([t.response for t in tasks], add_special_tokens=False)["input_ids"]
    examples = []
    for prompt, response in zip(prompts, responses):
        response = [*response, END_TURN_ID]
        for k in range(math.ceil(len(response) / canvas_length)):
            start = k * canvas_length
            examples.append(Example(
                context=np.asarray(prompt + response[:start], np.int32),
                block=np.asarray(response[start:start + canvas_length], np.int32),
            ))
    return examples


def training_tasks(count: int, *, seed: int, weights: dict[str, float], corpus: str | None = None,
                   wordnet: str | None = None) -> list[Task]:
    """`count` training tasks mixed by `weights`; the corpora's shares come from their record files
    (`corpus`: the Python documentation, `wordnet`: WordNet's definitions; built when missing)."""
    families = [f for f in FAMILIES if weights.get(f, 1.0) > 0]
    total = sum(weights.get(c, 0.0) for c in CORPORA) + sum(weights.get(f, 1.0) for f in families)
    counts = {c: round(count * weights.get(c, 0.0) / total) for c in CORPORA}
    tasks = sample_tasks(count - sum(counts.values()), seed=seed, weights=weights, families=families)
    if counts[DOCS]:
        from .corpus import DEFAULT_CORPUS, corpus_tasks, load_corpus

        tasks += corpus_tasks(load_corpus(corpus or str(DEFAULT_CORPUS)), counts[DOCS], seed=seed)
    if any(counts[c] for c in (WORDNET, OPEN_SUBJECTS, WORDNET_KEYS)):
        from .wordnet import DEFAULT_RECORDS, json_key_tasks, load_records, open_subject_tasks, wordnet_tasks

        records = load_records(wordnet or str(DEFAULT_RECORDS))
        makers = {WORDNET: wordnet_tasks, OPEN_SUBJECTS: open_subject_tasks, WORDNET_KEYS: json_key_tasks}
        for name, make in makers.items():
            if counts[name]:
                tasks += make(records, counts[name], seed=seed)
    return tasks


class TaskBatches:
    """Batch i of a training run, made on demand: `batch_size` tasks drawn from the mix with a seed
    of its own (seed, i), encoded and collated.  Any batch can be made in any process, so a
    DataLoader's workers build them in parallel while the GPU trains, every batch is new text
    (no fixed pool to repeat), and a run resumed at step i sees the batches it would have seen.

    With `short_canvas` (say 64), a batch comes in two parts of fixed sizes: `full_share` of its rows on
    the full 256-token canvas (every block too long for the short one, filled up with short blocks drawn
    at random, so the model keeps seeing short answers on the canvas it is sampled on), the rest on the
    short canvas.  Fixed sizes matter: a new shape costs the eager step a kernel-selection pass, and
    parts of a new size every step ran at 1.2 s a step against 0.67 s for shapes already seen (H100).  Nine answers in ten fit 64 tokens, and the decoder's
    work grows with the canvas: most of a full canvas is the `<eos>` fill.  train_step weighs the parts
    as one batch on the full canvas (objective.diffusion_loss's `normalizer`).

        batches = TaskBatches("assets/tokenizer", 256, seed=0, weights=FAMILY_WEIGHTS)
        parts = batches[17]                         # [collate()'s dict of numpy arrays]
    """

    def __init__(self, tokenizer_dir: str | Path, batch_size: int, *, seed: int, weights: dict[str, float] | None = None,
                 corpus: str | None = None, wordnet: str | None = None, canvas_length: int = CANVAS_LENGTH,
                 short_canvas: int | None = None, full_share: float = FULL_CANVAS_SHARE):
        self.tokenizer_dir, self.batch_size, self.seed = str(tokenizer_dir), batch_size, seed
        self.weights = FAMILY_WEIGHTS if weights is None else weights
        self.corpus, self.wordnet, self.canvas_length = corpus, wordnet, canvas_length
        self.short_canvas, self.full_share = short_canvas, full_share
        self._tokenizer = None  # loaded in the process that makes the batches

    def __len__(self) -> int:
        return 2**31 - 1  # as many as a run asks for

    def tasks(self, i: int) -> list[Task]:
        return training_tasks(self.batch_size, seed=self.seed * 1_000_003 + i, weights=self.weights, corpus=self.corpus,
                              wordnet=self.wordnet)

    def __getitem__(self, i: int) -> list[dict[str, np.ndarray]]:
        """Batch i as one or two parts (collate()'s dicts): with `short_canvas`, the blocks that fit it,
        less some drawn with the batch's own seed to fill `full_share` of the rows, are one part on the
        short canvas, the rest the other on the full one (a rare batch with more long blocks than that
        leaves the extra ones out)."""
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(self.tokenizer_dir)
        examples = encode_tasks(self._tokenizer, self.tasks(i), canvas_length=self.canvas_length)
        examples = examples[: self.batch_size]  # a long answer's later blocks may fall off
        if not self.short_canvas:
            return [collate(examples, canvas_length=self.canvas_length, context_multiple=CONTEXT_MULTIPLE)]
        full_rows = round(len(examples) * self.full_share)
        order = np.random.default_rng([self.seed, i, 1]).permutation(len(examples))
        fits = [examples[k] for k in order if len(examples[k].block) <= self.short_canvas]
        too_long = [examples[k] for k in order if len(examples[k].block) > self.short_canvas][:full_rows]
        filler = full_rows - len(too_long)
        parts = [(fits[filler:], self.short_canvas), (too_long + fits[:filler], self.canvas_length)]
        return [collate(part, canvas_length=length, context_multiple=CONTEXT_MULTIPLE) for part, length in parts if part]


def collate(examples: list[Example], *, canvas_length: int = CANVAS_LENGTH, context_multiple: int = 1) -> dict[str, np.ndarray]:
    """Pad a batch: contexts right-padded with <pad> (masked out) to a multiple of `context_multiple`,
    blocks filled up with <eos>.

    Returns context_ids (B, L) int64, context_mask (B, L) bool, context_length (B,) int64,
    target (B, canvas) int64 and content_length (B,) int64 (target ids before the <eos> fill).
    """
    longest = -(-max(len(e.context) for e in examples) // context_multiple) * context_multiple
    batch = len(examples)
    context_ids = np.full((batch, longest), PAD_ID, np.int64)
    context_mask = np.zeros((batch, longest), bool)
    target = np.full((batch, canvas_length), EOS_ID, np.int64)
    for i, e in enumerate(examples):
        context_ids[i, : len(e.context)] = e.context
        context_mask[i, : len(e.context)] = True
        target[i, : len(e.block)] = e.block
    return {
        "context_ids": context_ids,
        "context_mask": context_mask,
        "context_length": np.array([len(e.context) for e in examples], np.int64),
        "target": target,
        "content_length": np.array([len(e.block) for e in examples], np.int64),
    }
