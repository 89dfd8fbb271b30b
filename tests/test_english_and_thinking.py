"""Open-ended English families, the Python-documentation corpus and the think-then-answer family."""

from __future__ import annotations

import random

import pytest

from prompts.tasks import ENGLISH_FAMILIES, GENERATORS, check_task
from prompts.tasks.open_english import EXTRA_SUBJECTS
from prompts.tasks.subjects import SUBJECTS
from prompts.tasks.thinking import CHANNEL_CLOSE, THOUGHT_HEADER, split_thought
from training.corpus import clean, parse_glossary, parse_sections
from training.tokenizer import CHANNEL_CLOSE_ID, CHANNEL_OPEN_ID, THINK_ID

TOKENIZER = "assets/tokenizer"
ALL_SUBJECTS = sorted({s.split(" ", 1)[-1] if s.startswith(("a ", "an ", "the ")) else s
                       for table in (*SUBJECTS.values(), *EXTRA_SUBJECTS.values()) for s in table})


@pytest.mark.parametrize("family", ENGLISH_FAMILIES)
def test_english_answers_name_the_subject_asked_about(family):
    rng = random.Random(0)
    for _ in range(100):
        task = GENERATORS[family](rng)
        asked = [s for s in ALL_SUBJECTS if f" {s}" in f" {task.prompt.lower()}"]
        assert asked and task.response[-1] in ".!?"
        assert any(s[:5] in task.response.lower() for s in asked), (task.prompt, task.response)  # "volca"no(es)


def test_rest_markup_is_reduced_to_text():
    assert clean("Use :func:`len` on a :term:`sequence <sequence>`, see ``x + y`` and `docs <https://x>`_.") == \
        "Use len() on a sequence, see x + y and docs."


def test_glossary_and_sections_are_parsed_from_rest():
    glossary = "\n".join([".. glossary::", "", "   iterator", "      An object representing a stream of",
                          "      data.", "", "      More detail here.", "", "   list", "      A built-in sequence."])
    assert parse_glossary(glossary) == [
        {"kind": "glossary", "title": "iterator", "text": "An object representing a stream of data."},
        {"kind": "glossary", "title": "list", "text": "A built-in sequence."}]
    faq = "\n".join(["Why is Python slow sometimes?", "-----------------------------", "",
                     "Python runs your program through an interpreter, which does more work for each step than",
                     "compiled machine code does, so tight loops can take longer.", "", "::", "", "    code"])
    [record] = parse_sections(faq, "faq")
    assert record["title"] == "Why is Python slow sometimes?" and record["text"].startswith("Python runs")


def test_thinking_answers_carry_a_thought_block_and_pass_the_base_checker():
    rng = random.Random(1)
    for _ in range(60):
        task = GENERATORS["thinking"](rng)
        assert task.thinking and task.response.startswith(THOUGHT_HEADER) and CHANNEL_CLOSE in task.response
        assert check_task(task, task.response) is True
        thought, answer = split_thought(task.response)
        assert thought and check_task(task, answer) is False  # no thought block: not a think-then-answer


def test_chat_template_switches_thinking_on_with_gemma4_markers():
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER)
    assert tokenizer.convert_tokens_to_ids(["<|think|>", "<|channel>", "<channel|>"]) == [
        THINK_ID, CHANNEL_OPEN_ID, CHANNEL_CLOSE_ID] == [98, 100, 101]
    user = [{"role": "user", "content": "Hi"}]
    plain = tokenizer.apply_chat_template(user, add_generation_prompt=True, tokenize=False)
    assert plain == "<bos><|turn>user\nHi<turn|>\n<|turn>model\n"  # unchanged without thinking
    thinking = tokenizer.apply_chat_template(user, add_generation_prompt=True, tokenize=False, enable_thinking=True)
    assert thinking == "<bos><|turn>system\n<|think|><turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n"
    system = [{"role": "system", "content": "Be brief."}, *user]
    assert tokenizer.apply_chat_template(system, add_generation_prompt=True, tokenize=False, enable_thinking=True) \
        .startswith("<bos><|turn>system\n<|think|>Be brief.<turn|>\n<|turn>user\n")
    ids = tokenizer("<|channel>thought\nok<channel|>done", add_special_tokens=False)["input_ids"]
    assert ids[0] == CHANNEL_OPEN_ID and CHANNEL_CLOSE_ID in ids


def test_builtin_guide_names_every_family_with_examples_outside_the_eval_set():
    from prompts.builtin_guide import GUIDE, guide_markdown
    from prompts.tasks.paraphrase_eval import eval_prompts

    text = guide_markdown()
    assert all(f.title in text and f.examples for f in GUIDE)
    assert all(e in text for f in GUIDE for e in f.examples)
    assert not {e for f in GUIDE for e in f.examples} & eval_prompts()
