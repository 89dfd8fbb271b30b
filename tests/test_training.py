"""Tokenizer, training data, the diffusion objective, a tiny CPU training run, and the eval helpers."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
import torch

from prompts.tasks import Task, sample_tasks
from backends.small_models import small_config
from training.data import Example, build_tokenizer, collate, encode_tasks, prompt_ids_batch
from tests.fake_records import fake_trace
from training.denoising_stats import block_stats
from training.objective import (decoder_logits, diffusion_loss, encode_context, noise_levels, place_own_samples,
                                shift_accepted, replace_with_noise, to_device)
from training.tokenizer import END_TURN_ID, EOS_ID, PAD_ID, train_tokenizer
from training.train import TrainConfig, learning_rate, parse_args, train

TOKENIZER_DIR = "assets/tokenizer"


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(TOKENIZER_DIR)


@pytest.fixture(autouse=True)
def one_thread():
    # small models on a shared 2-core machine run fastest without intra-op threads
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# ---- tokenizer -----------------------------------------------------------------------------------
def test_tokenizer_keeps_gemma_special_ids(tokenizer):
    ids = tokenizer.convert_tokens_to_ids(["<pad>", "<eos>", "<bos>", "<|turn>", "<turn|>", "<|tool_response>"])
    assert ids == [0, 1, 2, 105, 106, 50]
    assert len(tokenizer) == 4096


def test_chat_template_is_gemma4_style(tokenizer):
    text = tokenizer.apply_chat_template([{"role": "user", "content": "Hi there"}], add_generation_prompt=True,
                                         tokenize=False)
    assert text == "<bos><|turn>user\nHi there<turn|>\n<|turn>model\n"


@pytest.mark.model
def test_shipped_tokenizer_is_what_build_tokenizer_makes(tokenizer):
    """assets/tokenizer is reproducible from the repository: same vocabulary, same merges."""
    fresh = build_tokenizer(seed=0)
    assert fresh.backend_tokenizer.to_str() == tokenizer.backend_tokenizer.to_str()


def test_isolate_capitals_makes_each_capital_a_token():
    texts = ["Calm waves roll in.", "Old tides. Calm seas. Calm skies."] * 20
    plain = train_tokenizer(texts, vocab_size=600)
    isolated = train_tokenizer(texts, vocab_size=600, isolate_capitals=True)
    assert plain.convert_ids_to_tokens(plain.encode("Calm", add_special_tokens=False)) == ["Calm"]
    assert isolated.convert_ids_to_tokens(isolated.encode("Calm", add_special_tokens=False))[0] == "C"
    assert isolated.decode(isolated.encode("Calm waves, OCEAN", add_special_tokens=False)) == "Calm waves, OCEAN"


def test_space_apart_splits_a_word_the_same_after_a_space_and_after_a_quote():
    texts = ["the capacity of the hall and the capacity of the room", '{"a": 1, "b": 2}'] * 20  # never quoted
    plain = train_tokenizer(texts, vocab_size=600)
    apart = train_tokenizer(texts, vocab_size=600, space_apart=True)

    def word_pieces(tok, text):
        pieces = [tok.decode([i]) for i in tok.encode(text, add_special_tokens=False)]
        return [p.strip(' "') for p in pieces if p.strip(' "')]

    assert word_pieces(apart, " capacity") == word_pieces(apart, '"capacity') == ["capacity"]
    assert word_pieces(plain, " capacity") != word_pieces(plain, '"capacity')  # what the option is for
    assert apart.decode(apart.encode('Keys: salary, "seats" {"a": 1}', add_special_tokens=False)) == 'Keys: salary, "seats" {"a": 1}'


def test_whole_numbers_makes_every_number_below_it_one_token():
    """The option the issue-14 runs used: an arithmetic answer is one token for the parallel sampler."""
    whole = build_tokenizer(count=300, whole_numbers=200)
    plain = build_tokenizer(count=300, whole_numbers=0)
    for n in range(200):
        assert len(whole.encode(f" {n}", add_special_tokens=False)) == 1, n
        assert len(whole.encode(f"{n}", add_special_tokens=False)) == 1, n
    assert any(len(plain.encode(f" {n}", add_special_tokens=False)) > 1 for n in range(200))
    assert whole.decode(whole.encode("33 + 47 = 80", add_special_tokens=False)) == "33 + 47 = 80"


# ---- data ----------------------------------------------------------------------------------------
def test_examples_use_the_inference_prompt_and_end_the_turn(tokenizer):
    from backends.text import chat_prompt_ids

    tasks = sample_tasks(40, seed=2)
    assert prompt_ids_batch(tokenizer, [t.prompt for t in tasks]) == [chat_prompt_ids(tokenizer, t.prompt)
                                                                        for t in tasks]
    tasks += sample_tasks(3, seed=2, families=["thinking"])  # asked with enable_thinking: <|think|> in a system turn
    for task, example in zip(tasks, encode_tasks(tokenizer, tasks)):
        if task.thinking:
            assert example.context.tolist() == prompt_ids_batch(tokenizer, [task.prompt], enable_thinking=True)[0]
            assert 98 in example.context.tolist() and example.block.tolist()[0] == 100  # <|think|>, <|channel>
        else:
            assert example.context.tolist() == chat_prompt_ids(tokenizer, task.prompt)
        assert example.block[-1] == END_TURN_ID
        assert tokenizer.decode(example.block[:-1].tolist()) == task.response


def test_long_responses_train_later_blocks_on_earlier_ones(tokenizer):
    task = Task("story", "Tell a story.", "one two three four five six seven eight nine ten eleven twelve", None)
    examples = encode_tasks(tokenizer, [task], canvas_length=8)
    response = tokenizer.encode(task.response, add_special_tokens=False) + [END_TURN_ID]
    assert len(examples) == math.ceil(len(response) / 8) >= 2
    prompt = prompt_ids_batch(tokenizer, [task.prompt])[0]
    for k, example in enumerate(examples):
        assert example.context.tolist() == prompt + response[: 8 * k]
        assert example.block.tolist() == response[8 * k: 8 * (k + 1)]


def test_collate_pads_contexts_and_fills_blocks_with_eos():
    batch = collate([Example(np.array([5, 6, 7], np.int32), np.array([9, END_TURN_ID], np.int32)),
                     Example(np.array([8], np.int32), np.array([10, 11, END_TURN_ID], np.int32))], canvas_length=6)
    assert batch["context_ids"].tolist() == [[5, 6, 7], [8, PAD_ID, PAD_ID]]
    assert batch["context_mask"].tolist() == [[True, True, True], [True, False, False]]
    assert batch["context_length"].tolist() == [3, 1]
    assert batch["target"].tolist() == [[9, 106, EOS_ID, EOS_ID, EOS_ID, EOS_ID], [10, 11, 106, EOS_ID, EOS_ID, EOS_ID]]
    assert batch["content_length"].tolist() == [2, 3]


# ---- objective -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def random_model():
    from transformers import DiffusionGemmaForBlockDiffusion

    torch.manual_seed(0)
    return DiffusionGemmaForBlockDiffusion(small_config(300, "test", canvas_length=16)).eval()


def test_padded_batch_gives_the_logits_of_generate(random_model):
    """Right-padded contexts + explicit positions = the model's own single-row forward, as generate() runs it."""
    rng = np.random.default_rng(0)
    examples = [Example(rng.integers(5, 300, n).astype(np.int32), rng.integers(5, 300, m).astype(np.int32))
                for n, m in [(7, 16), (12, 5), (3, 9)]]
    batch = to_device(collate(examples, canvas_length=16), "cpu")
    canvas = torch.randint(0, 300, (3, 16))
    self_conditioning = torch.randn(3, 16, 300)
    with torch.no_grad():
        batched = decoder_logits(random_model, encode_context(random_model, batch), canvas, batch, self_conditioning)
        for i, example in enumerate(examples):
            single = random_model(input_ids=torch.tensor(example.context[None], dtype=torch.long),
                                  decoder_input_ids=canvas[i: i + 1],
                                  self_conditioning_logits=self_conditioning[i: i + 1]).logits
            torch.testing.assert_close(batched[i], single[0], atol=1e-5, rtol=1e-5)


def test_noise_replaces_exactly_the_chosen_positions():
    target = torch.arange(64).reshape(2, 32) % 7 + 10
    noised = torch.rand(2, 32, generator=torch.Generator().manual_seed(1)) < 0.5
    canvas = replace_with_noise(target, noised, vocab_size=5, generator=torch.Generator().manual_seed(2))
    assert torch.equal(canvas[~noised], target[~noised])
    assert (canvas[noised] < 5).all()  # fresh uniform ids, never the target's 10..16


def test_noise_levels_cover_the_sampler_first_step():
    r = noise_levels(4000, device="cpu", generator=torch.Generator().manual_seed(0))
    assert r.min() >= 0.02 and r.max() <= 1.0
    assert 0.05 < (r == 1.0).float().mean() < 0.15  # fully random canvases, like step one


def test_own_samples_go_only_to_newly_accepted_low_entropy_positions():
    canvas = torch.arange(8).view(1, 8) + 100  # ids 100..107, outside the logits' vocabulary
    newly_accepted = torch.tensor([[0, 1, 1, 0, 1, 1, 0, 0]], dtype=torch.bool)
    logits = torch.full((1, 8, 50), -30.0)
    logits[..., 42] = 30.0  # certain: the sample is 42
    logits[0, 5] = 0.0  # flat: entropy log(50), which the sampler would not accept
    g = torch.Generator().manual_seed(0)

    capped = place_own_samples(canvas, newly_accepted, logits, 1.0, max_entropy=0.1, generator=g)
    assert capped.tolist() == [[100, 42, 42, 103, 42, 105, 106, 107]]
    uncapped = place_own_samples(canvas, newly_accepted, logits, 1.0, generator=g)
    assert uncapped[0, [1, 2, 4]].tolist() == [42, 42, 42] and uncapped[0, 5] < 50  # a sample, not the truth
    assert torch.equal(uncapped[~newly_accepted], canvas[~newly_accepted])
    assert torch.equal(place_own_samples(canvas, newly_accepted, logits, 0.0, generator=g), canvas)

    wide = torch.ones(1, 4000, dtype=torch.bool)
    half = place_own_samples(torch.full((1, 4000), 100), wide, torch.zeros(1, 4000, 50), 0.5, generator=g)
    assert 0.45 < (half < 50).float().mean() < 0.55


def test_shifted_canvases_hold_the_target_off_by_one_or_two_from_a_cut_in_the_content():
    rows, length = 400, 24
    target = torch.arange(length).repeat(rows, 1) + 1000  # distinct ids: an offset is readable off the canvas
    canvas = torch.full((rows, length), 7)  # noise stand-in
    accepted = torch.rand(rows, length, generator=torch.Generator().manual_seed(1)) < 0.6
    canvas = torch.where(accepted, target, canvas)
    content_length = torch.randint(4, length, (rows,), generator=torch.Generator().manual_seed(2))
    out = shift_accepted(canvas, target, accepted, content_length, 0.5, generator=torch.Generator().manual_seed(3))

    assert torch.equal(out[~accepted], canvas[~accepted])  # noise stays noise
    changed = (out != canvas).any(1)
    assert 0.4 < changed.float().mean() < 0.6
    seen_shifts = set()
    for row in torch.nonzero(changed).flatten().tolist():
        moved = torch.nonzero(out[row] != canvas[row]).flatten()
        cut = int(moved[0])  # the cut, or the first accepted position after it
        offsets = [int(target[row, i] - out[row, i]) for i in moved]  # target[i - shift] = target[i] - shift
        shift = max(set(offsets), key=offsets.count)  # all of them but where the canvas's end clamps
        assert shift in {-2, -1, 1, 2}
        seen_shifts.add(shift)
        after = [i for i in range(cut, length) if accepted[row, i]]  # every accepted position from the cut on
        expected = [int(target[row, min(max(i - shift, 0), length - 1)]) for i in after]
        assert out[row, after].tolist() == expected
        assert torch.equal(out[row, :cut], canvas[row, :cut])
    assert seen_shifts == {-2, -1, 1, 2}
    everywhere = torch.ones_like(accepted)  # every position accepted: the first one moved is the cut
    out = shift_accepted(target, target, everywhere, content_length, 1.0, generator=torch.Generator().manual_seed(4))
    cuts = (out != target).int().argmax(1)
    assert (out != target).any(1).all() and (cuts < content_length).all() and cuts.min() == 0 and cuts.float().mean() > 3
    assert torch.equal(shift_accepted(canvas, target, accepted, content_length, 0.0), canvas)


def test_self_correction_changes_what_the_second_pass_sees(random_model):
    rng = np.random.default_rng(1)
    examples = [Example(rng.integers(5, 300, 6).astype(np.int32), rng.integers(5, 300, 16).astype(np.int32))
                for _ in range(4)]
    batch = to_device(collate(examples, canvas_length=16), "cpu")

    def loss(share):
        with torch.no_grad():
            value, stats = diffusion_loss(random_model, batch, self_condition=True, self_correction=share,
                                          generator=torch.Generator().manual_seed(3))
        assert torch.isfinite(value)
        return value.item()

    assert loss(0.0) == loss(0.0)  # the generator fixes every draw
    assert loss(1.0) != loss(0.0)

    def shifted_loss(share):
        with torch.no_grad():
            value, _ = diffusion_loss(random_model, batch, self_condition=False, shift_correction=share,
                                      generator=torch.Generator().manual_seed(3))
        return value.item()

    unshifted = diffusion_loss(random_model, batch, self_condition=False, generator=torch.Generator().manual_seed(3))
    assert shifted_loss(0.0) == unshifted[0].item()  # off draws nothing: older recipes keep their random streams
    assert shifted_loss(1.0) != shifted_loss(0.0)


def test_learning_rate_warms_up_then_decays():
    config = TrainConfig(lr=1e-3, warmup_steps=10, min_lr_ratio=0.1)
    assert learning_rate(0, 100, config) == pytest.approx(1e-4)
    assert learning_rate(9, 100, config) == pytest.approx(1e-3)
    assert learning_rate(100, 100, config) == pytest.approx(1e-4)
    assert learning_rate(55, 100, config) < learning_rate(20, 100, config)


# ---- a tiny CPU training run ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny-run")
    config = TrainConfig(out=str(out), preset="test", tokenizer=TOKENIZER_DIR, steps=30, batch_size=8,
                         lr=3e-3, warmup_steps=5, log_every=5, workers=1, device="cpu", self_correction=0.5)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # module-scoped: set here, the per-test fixture is not active yet
    try:
        with torch.random.fork_rng():
            train(config)
    finally:
        torch.set_num_threads(threads)
    return out


@pytest.mark.model
def test_tiny_training_run_lowers_the_loss(tiny_run):
    log = [json.loads(line) for line in (tiny_run / "train_log.jsonl").read_text().splitlines()]
    assert [row["step"] for row in log] == list(range(5, 31, 5))
    assert log[-1]["loss"] < 0.6 * log[0]["loss"]


@pytest.mark.model
def test_trained_folder_loads_like_a_checkpoint(tiny_run):
    from backends.transformers_backend import TransformersBackend
    from backends import record_trace
    from visualizer.settings import GenerationSettings

    generation = json.loads((tiny_run / "generation_config.json").read_text())
    assert generation["eos_token_id"] == [1, 106] and generation["pad_token_id"] == 0
    assert generation["max_denoising_steps"] == 48 and generation["sampler_config"]["entropy_bound"] == 0.1
    backend = TransformersBackend(str(tiny_run), device="cpu")
    assert backend.info.vocab_size == 4096 and backend.info.canvas_length == 256 and backend.info.dtype == "float32"
    trace = record_trace(backend, "Why is the sky blue?", GenerationSettings(seed=0, max_denoising_steps=3))
    assert trace.blocks and len(trace.block_steps(0)) == trace.blocks[0].steps_used <= 3


def test_train_cli_rejects_bad_arguments(capsys):
    from training.train import main

    with pytest.raises(SystemExit) as exit_info:
        main(["--preset", "huge"])
    assert exit_info.value.code == 2
    assert "unknown preset 'huge'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--steps", "0"])
    capsys.readouterr()
    for bad, message in ((["--self-correction", "1.5"], "between 0 and 1"),
                         (["--self-correction-max-entropy", "0"], "must be above 0"),
                         (["--routing", "sorted"], "unknown --routing 'sorted'"),
                         (["--shift-correction", "2"], "share of examples")):
        with pytest.raises(SystemExit):
            main(bad)
        assert message in capsys.readouterr().err


def test_training_gathers_the_routers_scale_unless_told_stock(tmp_path, monkeypatch):
    """--routing gather (the default) patches every router before the first step; stock leaves transformers'
    forward; the first step's loss is the same either way (the forward is transformers' bit for bit)."""
    import training.routing

    patched = []
    real = training.routing.use_gather_routing
    monkeypatch.setattr(training.routing, "use_gather_routing",
                        lambda model: (patched.append(len(training.routing.routers(model))), real(model)))
    first_losses = {}
    for routing in ("gather", "stock"):
        out = tmp_path / routing
        config = TrainConfig(out=str(out), preset="test", tokenizer=TOKENIZER_DIR, steps=1, batch_size=4,
                             warmup_steps=1, log_every=1, workers=0, device="cpu", routing=routing)
        with torch.random.fork_rng():
            train(config)
        first_losses[routing] = json.loads((out / "train_log.jsonl").read_text().splitlines()[0])["loss"]
    assert len(patched) == 1 and patched[0] > 0  # the gather run only, and it found routers to patch
    assert first_losses["gather"] == first_losses["stock"]


# ---- denoising statistics and the evaluation report ----------------------------------------------
def test_block_stats_read_the_metrics_of_the_first_block():
    # positions 0-1 at step 0; 2-3 at step 1 (1 remasked); 4 at step 2; 5 never accepted; EOS at 6, pad after
    trace = fake_trace(["11000000", "10110000", "11111000"], canvas_length=8, eos_at=6)
    stats = block_stats(trace, 0)
    assert stats["content_tokens"] == 6 and stats["steps_used"] == 3
    assert stats["tokens_per_step"] == 2.0 and stats["max_new_per_step"] == 2
    assert stats["never_accepted"] == 1 and stats["remasked"] == 1 and stats["steps_with_new"] == 3
    # left to right in tied batches: 13 concordant pairs, 0 discordant, 2 tied in the step
    assert stats["tau_b"] == pytest.approx(13 / math.sqrt(13 * 15))


def test_tau_b_is_undefined_when_everything_commits_at_once():
    stats = block_stats(fake_trace(["1111"], canvas_length=4), 0)
    assert math.isnan(stats["tau_b"]) and stats["max_new_per_step"] == 4


def test_evaluation_summary_counts_targets():
    from training.evaluate import format_report, summarize

    rows = [{"kind": "heldout", "family": "json", "ok": ok, "eos": True, "steps_used": 5, "tokens_per_step": 3.0,
             "tau_b": 0.1, "wall_time_s": 1.0} for ok in (True, True, True, False)]
    summary = summarize(rows)
    json_row = next(t for t in summary["targets"] if t["metric"].startswith("JSON"))
    assert json_row["share"] == 0.75 and json_row["met"] is False
    assert "JSON parses and matches the schema" in format_report(summary)


def test_visitor_json_answers_are_counted_key_by_key():
    from prompts.tasks.paraphrase_eval import paraphrase_eval_set
    from training.evaluate import format_report, keys_written, summarize

    task = next(t for t in paraphrase_eval_set(60) if t.family == "json_paraphrase" and len(t.answer["required"]) == 2)
    first, second = task.answer["required"]
    assert keys_written(task.answer, f'{{"{first}": 1, "{second}x": 2}}') == {first: True, second: False}
    assert keys_written(task.answer, f'{{"{first}":"{second}": 1') == {first: True, second: True}  # unparsed too
    assert keys_written(None, "{}") is None  # not a JSON task

    def row(written, ok):
        return {"kind": "paraphrase", "scored_as": "json", "family": "json_paraphrase", "ok": ok,
                "keys_written": written}

    rows = [row({"capacity": False, "name": True}, False), row({"capacity": True}, True),
            row({"name": True, "age": True}, False), row({"age": True}, True)]
    keys = summarize(rows)["json_keys"]
    assert keys["keys"] == [{"key": "age", "written": 2, "asked": 2}, {"key": "capacity", "written": 1, "asked": 2},
                            {"key": "name", "written": 2, "asked": 2}]
    assert keys["misses"] == 2 and keys["misses_lacking_a_key"] == 1
    report = format_report(summarize(rows))
    assert "2 wrong answers, 1 of them without an asked key; 3 distinct keys asked, 1 not always written" in report
    assert "  capacity 1/2" in report and "name 2/2" not in report


@pytest.mark.model
def test_training_can_continue_from_a_saved_folder(tiny_run, tmp_path):
    from safetensors.torch import load_file

    before = load_file(str(tiny_run / "model.safetensors"))
    config = TrainConfig(out=str(tmp_path), init_from=str(tiny_run), steps=3, batch_size=4, lr=1e-3,
                         warmup_steps=1, log_every=1, workers=1, device="cpu", family_weights="json=1")
    with torch.random.fork_rng():
        train(config)
    after = load_file(str(tmp_path / "model.safetensors"))
    assert set(after) == set(before)
    assert any(not torch.equal(after[k], before[k]) for k in before)  # it trained on from the saved weights
    assert (tmp_path / "tokenizer.json").read_text() == (tiny_run / "tokenizer.json").read_text()


def test_batches_are_made_on_demand_the_same_anywhere():
    from prompts.tasks import FAMILIES
    from training.data import TaskBatches

    weights = {**{f: 0.0 for f in FAMILIES}, "json": 1.0, "math": 1.0}  # a family left out weighs 1
    batches = TaskBatches(TOKENIZER_DIR, 6, seed=3, weights=weights)
    again = TaskBatches(TOKENIZER_DIR, 6, seed=3, weights=weights)
    [first] = batches[7]
    assert first["target"].shape == (6, 256) and first["context_ids"].shape[0] == 6
    assert all(np.array_equal(first[k], again[7][0][k]) for k in first)  # a batch depends on (seed, index) alone
    assert not np.array_equal(first["target"], batches[8][0]["target"])
    assert {t.family for i in range(5) for t in batches.tasks(i)} == {"json", "math"}


def test_short_answers_go_to_a_short_canvas_and_nothing_is_lost():
    from prompts.tasks import FAMILIES
    from training.data import TaskBatches

    weights = {**{f: 0.0 for f in FAMILIES}, "math": 1.0, "fact_list": 1.0}  # ~15 and ~115 tokens
    whole = TaskBatches(TOKENIZER_DIR, 64, seed=3, weights=weights)[2][0]
    parts = TaskBatches(TOKENIZER_DIR, 64, seed=3, weights=weights, short_canvas=32, full_share=0.75)[2]
    short, full = parts
    assert short["target"].shape == (16, 32) and full["target"].shape == (48, 256)  # fixed part sizes
    assert (short["content_length"] <= 32).all() and (full["content_length"] > 32).any()
    assert (full["content_length"] <= 32).any()  # short ones fill up the full part
    assert short["context_ids"].shape[1] % 16 == 0 and full["context_ids"].shape[1] % 16 == 0  # few shapes

    def blocks(part):
        return sorted(tuple(row[:n]) for row, n in zip(part["target"].tolist(), part["content_length"]))

    assert sorted(blocks(short) + blocks(full)) == blocks(whole)  # every block once, unchanged
    assert (short["target"][short["content_length"][:, None] <= np.arange(32)] == 1).all()  # <eos> fill
    again = TaskBatches(TOKENIZER_DIR, 64, seed=3, weights=weights, short_canvas=32, full_share=0.75)[2]
    assert all(np.array_equal(a[k], b[k]) for a, b in zip(parts, again) for k in a)


def test_train_step_weighs_the_parts_as_one_batch_on_the_full_canvas(random_model):
    """A short-canvas part and a full one: each position's loss weighs 1 / (examples x full canvas), as
    in one batch on the full canvas, and the step's gradient is their sum."""
    from training.train import train_step

    rng = np.random.default_rng(2)

    def examples(n, length):
        return [Example(rng.integers(5, 300, 6).astype(np.int32), rng.integers(5, 300, length).astype(np.int32))
                for _ in range(n)]

    parts = [to_device(collate(examples(3, 5), canvas_length=8), "cpu"),
             to_device(collate(examples(2, 12), canvas_length=16), "cpu")]
    weight = next(random_model.parameters())
    optimizer = torch.optim.SGD(random_model.parameters(), lr=0.0)
    stats = train_step(random_model, optimizer, parts, TrainConfig(grad_clip=1e9), self_condition=True,
                       generator=torch.Generator().manual_seed(4))
    step_grad = weight.grad.clone()

    random_model.zero_grad()
    generator, by_hand = torch.Generator().manual_seed(4), 0.0
    for part in parts:  # the same draws, in the same order
        mean, _ = diffusion_loss(random_model, part, self_condition=True, generator=generator)
        weighted = mean * part["target"].numel() / (5 * 16)
        weighted.backward()
        by_hand += weighted.item()
    assert stats["loss"].item() == pytest.approx(by_hand, rel=1e-5)
    torch.testing.assert_close(step_grad, weight.grad, rtol=1e-4, atol=1e-7)
    assert by_hand != pytest.approx(sum(diffusion_loss(random_model, p, self_condition=True,
                                                       generator=torch.Generator().manual_seed(4))[0].item()
                                        for p in parts) / 2, rel=1e-3)  # not a plain mean of the parts


def test_a_stopped_and_resumed_run_ends_with_the_weights_of_an_unbroken_one(tmp_path):
    """--stop-after-minutes saves the whole state; --resume goes on with the same batches, coins, noise,
    optimizer state and schedule, so the end is the same, bit for bit (CPU)."""
    from safetensors.torch import load_file

    def config(out, **extra):
        return TrainConfig(out=str(out), preset="test", tokenizer=TOKENIZER_DIR, steps=4, batch_size=4, lr=3e-3,
                           warmup_steps=1, log_every=1, workers=0, device="cpu", self_correction=0.5, **extra)

    with torch.random.fork_rng():
        train(config(tmp_path / "whole"))
    pieces = tmp_path / "pieces"
    with torch.random.fork_rng():
        train(config(pieces, stop_after_minutes=1e-9))  # stops after its first step
    assert json.loads((pieces / "training_summary.json").read_text())["steps"] == 1
    for _ in range(3):
        with torch.random.fork_rng():
            train(config(pieces, stop_after_minutes=1e-9, resume=True))
    summary = json.loads((pieces / "training_summary.json").read_text())
    assert summary["finished"] and summary["steps"] == 4 and len(summary["segments"]) == 4
    assert not (pieces / "resume.pt").exists()
    whole, resumed = load_file(str(tmp_path / "whole" / "model.safetensors")), load_file(str(pieces / "model.safetensors"))
    assert all(torch.equal(whole[k], resumed[k]) for k in whole)
    steps = [json.loads(line)["step"] for line in (pieces / "train_log.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4]


def test_resume_goes_on_with_the_stopped_runs_settings(tmp_path, capsys):
    """`--resume --out DIR` alone continues the stopped recipe (mix, batch, canvas), not the defaults."""
    out = tmp_path / "run"
    stopped = TrainConfig(out=str(out), preset="test", tokenizer=TOKENIZER_DIR, steps=3, batch_size=4, lr=1e-3,
                          warmup_steps=1, workers=0, device="cpu", family_weights="base", short_canvas=64,
                          stop_after_minutes=1e-9)
    with torch.random.fork_rng():
        train(stopped)
    resumed = parse_args(["--out", str(out), "--resume", "--batch-size", "99"])
    assert resumed == dataclasses.replace(stopped, resume=True, stop_after_minutes=None)
    assert "ignoring --batch-size" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        parse_args(["--out", str(tmp_path / "never-stopped"), "--resume"])


def test_family_weights_are_parsed_or_rejected():
    from training.train import parse_weights

    assert parse_weights("math=3,json=2.5") == {"math": 3.0, "json": 2.5}
    assert parse_weights(None) is None
    from training.data import ONE_MIX_FAMILY_WEIGHTS

    assert parse_weights("one-mix") == ONE_MIX_FAMILY_WEIGHTS and parse_weights("one-mix") is not ONE_MIX_FAMILY_WEIGHTS
    with pytest.raises(ValueError, match="unknown family.*one-mix"):
        parse_weights("poems=2")
    with pytest.raises(ValueError, match="name=number"):
        parse_weights("math=lots")
