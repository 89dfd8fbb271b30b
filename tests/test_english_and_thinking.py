"""Open-ended English families, the Python-documentation corpus and the think-then-answer family."""

from __future__ import annotations

import random

import pytest

from prompts.tasks import ENGLISH_FAMILIES, GENERATORS, check_task
from prompts.tasks import question_bank as qb
from prompts.tasks.open_english import EXTRA_SUBJECTS
from prompts.tasks.subjects import SUBJECTS
from prompts.tasks.thinking import CHANNEL_CLOSE, THOUGHT_HEADER, split_thought
from training.corpus import clean, parse_glossary, parse_sections
from training.tokenizer import CHANNEL_CLOSE_ID, CHANNEL_OPEN_ID, THINK_ID

TOKENIZER = "assets/tokenizer"
ALL_SUBJECTS = sorted({s.split(" ", 1)[-1] if s.startswith(("a ", "an ", "the ")) else s
                       for table in (*SUBJECTS.values(), *EXTRA_SUBJECTS.values()) for s in table})
# What a prompt of each family can ask about: table subjects, scenes, verb phrases and the like.
_SCENES = {f"{w} {t}" for w in qb.SCENE_WEATHER for t in qb.SCENE_TIMES}
ASKABLE = {"describe": {*ALL_SUBJECTS, *_SCENES}, "explain": set(ALL_SUBJECTS), "poem": set(ALL_SUBJECTS),
           "why": {*ALL_SUBJECTS, *qb.PEOPLE_DO}, "how": {*ALL_SUBJECTS, *qb.PEOPLE_LEARN},
           "tips": set(qb.TIP_SUBJECTS), "good": {*qb.GOOD, "chair", "map", "plan", "tool", "bag", "day"},
           "favorite": set(qb.FAVORITES)}


@pytest.mark.parametrize("family", ENGLISH_FAMILIES)
def test_english_answers_are_short_sentences_that_carry_what_was_asked(family):
    rng = random.Random(0)
    for _ in range(150):
        task = GENERATORS[family](rng)
        assert task.response[-1] in ".!?" and len(task.response.split()) <= 80, task.response
        if family == "suggest":  # "What should I read next?": named ideas, not the question's words
            assert sum(idea in task.response for ideas in qb.SUGGESTIONS.values() for idea in ideas) >= 2
            continue
        prompt = f" {task.prompt.lower()}"  # the subject slot comes after the frame's own words ("poetry about a jungle")
        asked = max((s for s in ASKABLE[family] if f" {s}" in prompt), key=lambda s: (prompt.rfind(f" {s}") + len(s), len(s)))
        asked = asked.replace(" my ", " your ")  # "How do I tidy my room?" -> "To tidy your room, ..."
        assert asked[:5] in task.response.lower(), (task.prompt, task.response)  # "volca"no(es)


def test_subject_words_agree_with_the_subject():
    rng = random.Random(3)
    for _ in range(300):
        task = GENERATORS["why"](rng)
        assert " is are " not in task.response and "they is" not in task.response.lower()
        assert not any(f"{p} are important" in task.response for p in ("Sleep", "Music", "A clock", "Time"))
    from prompts.tasks.open_english import Subject, fill

    said = {text: fill("{X} {be} important, and {it} {has} {its} place.", Subject(text, kind, None))
            for text, kind in (("dogs", "animal"), ("sleep", "idea"), ("a clock", "thing"), ("the mountains", "place"),
                               ("chess", "activity"), ("glass", "thing"))}
    assert said["dogs"] == "Dogs are important, and they have their place."
    assert said["the mountains"].startswith("The mountains are")
    assert all(said[t].startswith(t[0].upper() + t[1:] + " is important, and it has its") for t in ("sleep", "a clock",
                                                                                                  "chess", "glass"))


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


def test_wordnet_records_keep_common_nouns_with_plain_definitions(tmp_path):
    from training.wordnet import build_records, wordnet_tasks

    (tmp_path / "cntlist.rev").write_text("library%1:06:00:: 1 9\nsleep%1:26:00:: 1 7\nrare%1:06:00:: 1 1\n"
                                          "philadelphia%1:15:00:: 1 5\ntrunks%1:06:00:: 1 4\n")
    (tmp_path / "index.noun").write_text(
        "  1 This software and database is being provided\n"
        "library n 2 1 @ 2 1 00000001 00000009\nsleep n 1 1 @ 1 1 00000002\nrare n 1 1 @ 1 1 00000003\n"
        "philadelphia n 1 1 @ 1 1 00000004\ntrunks n 1 1 @ 1 1 00000005\n")
    (tmp_path / "data.noun").write_text(
        "00000001 06 n 02 library 0 depository_library 0 000 | a room where books are kept; \"they had brought their"
        " books\"\n"
        "00000002 26 n 01 sleep 0 000 | a natural and periodic state of rest during which consciousness is suspended\n"
        "00000003 06 n 01 rare 0 000 | something rare\n"
        "00000004 15 n 01 Philadelphia 0 000 | largest city in Pennsylvania\n"
        "00000005 06 n 01 trunks 0 000 | shorts worn by swimmers\n")
    records = build_records(tmp_path)
    assert records == [
        {"word": "library", "kind": "thing", "text": "A library is a room where books are kept."},
        {"word": "sleep", "kind": "idea",
         "text": "Sleep is a natural and periodic state of rest during which consciousness is suspended."}]
    tasks = wordnet_tasks(records, 40, seed=0)
    assert all(t.response.startswith(("A library is", "Sleep is")) for t in tasks)
    assert any("library" in t.prompt for t in tasks) and any("sleep" in t.prompt.lower() for t in tasks)


def test_plural_noun_follows_the_regular_rules_and_leaves_irregular_nouns_out():
    from prompts.tasks.open_english import plural_noun

    assert [plural_noun(w) for w in ("fox", "pony", "day", "bee", "finch", "walrus")] == [
        "foxes", "ponies", "days", "bees", "finches", "walruses"]
    assert [plural_noun(w) for w in ("sheep", "goose", "mouse", "fisherman")] == [None] * 4


def test_open_subject_task_carries_the_asked_noun_into_every_shape():
    from prompts.tasks.open_english import open_subject_task

    rng = random.Random(0)
    lantern = [open_subject_task(rng, "lantern", "place", "A lantern is a light in a case.") for _ in range(80)]
    assert {t.family for t in lantern} == {"good", "describe", "why", "poem"}
    assert all("lantern" in t.prompt and "lantern" in t.response.lower() for t in lantern)
    assert all(t.response.startswith("A good lantern") for t in lantern if t.family == "good")
    foxes = [open_subject_task(rng, "fox", "animal", "A fox is a small wild dog.") for _ in range(40)]
    assert all("foxes" in t.prompt and "foxes" in t.response.lower() for t in foxes if t.family != "good")
    assert any(t.family == "why" and ("Foxes are important" in t.response or "We need foxes" in t.response)
               for t in foxes)
    # a person is asked only what makes a good one; an uncountable idea has no shape
    nurse = {open_subject_task(rng, "nurse", "person", "A nurse is a person who cares for the sick.").family
             for _ in range(10)}
    assert nurse == {"good"}
    assert open_subject_task(rng, "honesty", "idea", "Honesty is the quality of being honest.") is None
    assert open_subject_task(rng, "sheep", "animal", "A sheep is a woolly animal.").family == "good"


def test_open_subject_tasks_draw_both_pools_and_keep_held_out_prompts_out(monkeypatch):
    import training.wordnet as wordnet

    records = [{"word": "meadow", "kind": "place", "text": "A meadow is a field of grass."},
               {"word": "honey", "kind": "food", "text": "Honey is a sweet food made by bees."},
               {"word": "fog", "kind": "nature", "text": "Fog is a cloud close to the ground."},
               {"word": "hammer", "kind": "thing", "text": "A hammer is a hand tool."},
               {"word": "honesty", "kind": "idea", "text": "Honesty is the quality of being honest."}]
    tasks = wordnet.open_subject_tasks(records, 300, seed=0)
    assert len(tasks) == 300 and not any("honesty" in t.prompt for t in tasks)
    hammer = [t for t in tasks if "hammer" in t.prompt]
    assert hammer and {t.family for t in hammer} == {"good"}
    assert 0.1 < len(hammer) / len(tasks) < 0.3  # GOOD_ONLY_SHARE of the draws
    assert {t.family for t in tasks} == {"good", "describe", "why", "poem", "how"}
    # prompts of the held-out split are drawn again: here every "good" prompt is held out
    monkeypatch.setattr(wordnet, "split_of", lambda prompt: "heldout" if "good" in prompt or "great" in prompt
                        else "train")
    assert not any(t.family == "good" for t in wordnet.open_subject_tasks(records, 200, seed=1))
    with pytest.raises(ValueError, match="every subject kind"):
        wordnet.open_subject_tasks(records[3:], 10, seed=0)  # no animal, food, nature or place


def test_open_subjects_join_a_mix_only_where_it_weighs_them(tmp_path):
    from prompts.tasks import FAMILIES
    from training.data import DOCS, NAMED_MIXES, OPEN_SUBJECTS, WORDNET, training_tasks

    path = tmp_path / "wordnet.jsonl"  # made-up nouns, so no generated family asks about them
    path.write_text('{"word": "zorblat", "kind": "place", "text": "A zorblat is a field of grass."}\n'
                    '{"word": "quimmet", "kind": "thing", "text": "A quimmet is a hand tool."}\n')
    weights = {**NAMED_MIXES["open-mix-5"], WORDNET: 0.0, DOCS: 0.0}  # CI has no documentation corpus

    def share(mix):
        tasks = training_tasks(2000, seed=0, weights=mix, wordnet=str(path))
        return sum(("zorblat" in t.prompt or "quimmet" in t.prompt) for t in tasks) / len(tasks)

    total = sum(weights.values()) + sum(1.0 for f in FAMILIES if f not in weights)
    assert share(weights) == pytest.approx(weights[OPEN_SUBJECTS] / total, abs=0.002)
    assert share({**weights, OPEN_SUBJECTS: 0.0}) == 0
    # a named mix means what it trained: only the mixes made for the open subjects draw them
    assert {name for name, mix in NAMED_MIXES.items() if mix.get(OPEN_SUBJECTS, 0.0) > 0} == {
        "open-mix-5", "drill-finetune-5", "math-finetune-5"}


def test_key_nouns_keep_plain_regular_nouns_only():
    from training.wordnet import key_nouns

    words = ["lantern", "ice cream", "meadow", "lantern",  # plain nouns, once each, "ice cream" joined by "_"
             "box", "sheep", "mouse", "field mouse", "pony",  # plurals that are not the noun and an s
             "Paris", "x-ray", "3d", "b12", "hot dog stand", "Ice cream"]  # capitalised, hyphen, digits, 3 words
    records = [{"word": w, "kind": "thing", "text": f"A {w} is a thing."} for w in words]
    assert key_nouns(records) == ("ice_cream", "lantern", "meadow")
    assert key_nouns(records[4:]) == ()


def _wordnet_key_records():  # made-up nouns, so no word pool of prompts/tasks holds them
    return [{"word": "zorblat", "kind": "place", "text": "A zorblat is a field of grass."},
            {"word": "quimmet", "kind": "thing", "text": "A quimmet is a hand tool."},
            {"word": "ice cream", "kind": "food", "text": "Ice cream is a frozen sweet food."},
            {"word": "mouse", "kind": "animal", "text": "A mouse is a small rodent."}]  # irregular: left out


def test_json_key_tasks_build_keys_from_the_given_nouns_and_keep_held_out_prompts_out(monkeypatch):
    import re

    import training.wordnet as wordnet
    from prompts.tasks import words
    from prompts.tasks.paraphrase import _KEY_SHAPES, GENERIC_KEYS, JSON_KEYS, make_json_paraphrase

    records = _wordnet_key_records()
    tasks = wordnet.json_key_tasks(records, 300, seed=0)
    assert len(tasks) == 300 and {t.family for t in tasks} == {"json_paraphrase"}
    assert all(check_task(t, t.response) for t in tasks)
    keys = [k for t in tasks for k in t.answer["properties"]]
    for noun in ("zorblat", "quimmet", "ice_cream"):
        assert any(noun in k for k in keys)
    assert any("iceCream" in k for k in keys)  # camel-cased built keys join the two words too
    assert not any("mouse" in k for k in keys)
    assert any("ice cream" in t.prompt for t in tasks)  # the described entity, written with a space

    # no built key takes a noun of words.NOUNS: every part of a key that is not recalled, not a shape's own
    # word, adjective or unit is one of the given nouns (or made up)
    recalled = set(GENERIC_KEYS) | {k for pool in JSON_KEYS.values() for k in pool}
    shape_words = {p for shapes in _KEY_SHAPES.values() for s in shapes for p in re.sub(r"\{\w+\}", "", s).split("_")}
    pool_nouns = set(words.NOUNS) - shape_words - set(words.ADJECTIVES) - set(words.UNIT_SUFFIXES)

    def with_pool_nouns(task_list):
        found = []
        for task in task_list:
            for key in task.answer["properties"]:
                if key in recalled:
                    continue
                parts = set(re.sub(r"[A-Z]", lambda m: "_" + m.group().lower(), key).split("_")) - shape_words
                if (parts | {p[:-1] for p in parts if p.endswith("s")}) & pool_nouns:
                    found.append(key)
        return found

    assert with_pool_nouns(tasks) == []
    assert len(with_pool_nouns([make_json_paraphrase(random.Random(s)) for s in range(300)])) > 100  # the check bites

    # prompts of the held-out split are drawn again: here every prompt naming a zorblat is held out
    monkeypatch.setattr(wordnet, "split_of", lambda prompt: "heldout" if "zorblat" in prompt.lower() else "train")
    again = wordnet.json_key_tasks(records, 200, seed=1)
    assert len(again) == 200 and not any("zorblat" in t.prompt.lower() for t in again)
    assert any("quimmet" in t.prompt for t in again)
    with pytest.raises(ValueError, match="plain nouns"):
        wordnet.json_key_tasks(records[3:], 10, seed=0)  # only an irregular noun


def test_wordnet_keys_join_a_mix_at_its_share_and_only_the_json_key_mixes_draw_them(tmp_path):
    import json

    from prompts.tasks import FAMILIES
    from training.data import DOCS, NAMED_MIXES, WORDNET, WORDNET_KEYS, training_tasks
    from training.wordnet import json_key_tasks

    records = _wordnet_key_records()
    path = tmp_path / "wordnet.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))

    def made_up(tasks):
        return sum(("zorblat" in t.prompt or "quimmet" in t.prompt) for t in tasks)

    for name in ("open-mix-6", "open-mix-7"):
        weights = {**NAMED_MIXES[name], WORDNET: 0.0, DOCS: 0.0}  # CI has no WordNet or documentation corpus
        tasks = training_tasks(2000, seed=0, weights=weights, wordnet=str(path))
        families = [f for f in FAMILIES if weights.get(f, 1.0) > 0]
        total = sum(weights.values()) + sum(1.0 for f in families if f not in weights)
        expected = round(2000 * weights[WORDNET_KEYS] / total)
        assert len(tasks) == 2000 and expected > 50
        drawn = json_key_tasks(records, expected, seed=0)
        assert made_up(tasks) == made_up(drawn) > 0  # the corpus's tasks, and no other family names the nouns
        if name == "open-mix-7":  # all the visitor JSON is the corpus's
            assert sum(t.family == "json_paraphrase" for t in tasks) == expected
        assert made_up(training_tasks(500, seed=0, weights={**weights, WORDNET_KEYS: 0.0}, wordnet=str(path))) == 0

    # "-6" moves half of the shipped stages' visitor JSON to the corpus, "-7" all of it; nothing else moves
    for source, six, seven in (("open-mix-4", "open-mix-6", "open-mix-7"),
                               ("drill-finetune", "drill-finetune-6", "drill-finetune-7"),
                               ("math-finetune", "math-finetune-6", "math-finetune-7")):
        old = NAMED_MIXES[source]
        for name, share in ((six, 0.5), (seven, 1.0)):
            new = NAMED_MIXES[name]
            assert new[WORDNET_KEYS] == pytest.approx(old["json_paraphrase"] * share) and new[WORDNET_KEYS] > 0
            assert new["json_paraphrase"] + new[WORDNET_KEYS] == pytest.approx(old["json_paraphrase"])
            assert {k: v for k, v in new.items() if k not in ("json_paraphrase", WORDNET_KEYS)} == {
                k: v for k, v in old.items() if k != "json_paraphrase"}
        assert NAMED_MIXES[seven]["json_paraphrase"] == 0
    assert {name for name, mix in NAMED_MIXES.items() if mix.get(WORDNET_KEYS, 0.0) > 0} == {
        "open-mix-6", "drill-finetune-6", "math-finetune-6", "open-mix-7", "drill-finetune-7", "math-finetune-7",
        "math-acrostic-finetune-7", "english-finetune-7", "general-finetune-7", "english-math-finetune-7"}
    # the fourth stage after "-7" draws no visitor JSON but the corpus's
    assert NAMED_MIXES["math-acrostic-finetune-7"]["json_paraphrase"] == 0
    # its two variants double the English question shapes, or everything but the visitor tasks; the rest stays
    fourth = NAMED_MIXES["math-acrostic-finetune-7"]
    english, general = NAMED_MIXES["english-finetune-7"], NAMED_MIXES["general-finetune-7"]
    visitor_tasks = {"math", "math_paraphrase", "math_drill", "acrostic", "acrostic_paraphrase", "json",
                     "json_paraphrase", WORDNET_KEYS}
    shapes = {"describe", "explain", "poem", "why", "how", "tips", "good", "favorite", "suggest"}
    assert set(english) == set(general) == set(fourth)
    for family, weight in fourth.items():
        assert english[family] == (2 * weight if family in shapes else weight)
        assert general[family] == (weight if family in visitor_tasks else 2 * weight)
    assert all(fourth[f] > 0 for f in shapes) and fourth[DOCS] > 0
    # the English variant with the visitor sums up by half and the JSON templates halved, the rest as the English one
    english_math = NAMED_MIXES["english-math-finetune-7"]
    moved = {"math_paraphrase": 1.5, "math_drill": 1.5, "json": 0.5}
    assert english_math == {f: w * moved.get(f, 1.0) for f, w in english.items()}
