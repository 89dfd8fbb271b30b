"""A scripted probe backend for the probe's tests: no model, records made from (prompt, seed), and its prompts.

    run_probe(ScriptedBackend(), PROBES, ...)   # commit order and confidence set by (prompt, seed); answers checked by `check`
"""

import dataclasses
from dataclasses import dataclass

import numpy as np

from backends.base import Backend
from tests.trace_factory import model_info, trace_from_commit_steps
from visualizer.settings import GenerationSettings


@dataclass(frozen=True)
class Probe:  # the shape of prompts.probes.ProbePrompt
    regime: str
    prompt_id: str
    prompt: str
    split: str
    answer: object | None


PROBES = [
    Probe("math", f"m{i}", f"What is {i} + {i}?", "exploratory" if i == 0 else "confirmatory", str(2 * i))
    for i in range(4)
] + [Probe("open", f"o{i}", f"Write line {i}", "exploratory" if i == 0 else "confirmatory", None) for i in range(4)]


def check(probe, response):
    return None if probe.answer is None else probe.answer in response


class ScriptedBackend(Backend):
    """Yields the records of a hand-built trace: commit order and confidence set by (prompt, seed)."""

    name = "transformers"

    def __init__(self):
        self.info = model_info(24)
        self.calls = 0

    def default_settings(self):
        return GenerationSettings(max_new_tokens=24, max_denoising_steps=8, seed=0)

    def prompt_ids(self, prompt, *, thinking=False):
        return [2, 5]

    def _produce(self, ids, settings, emit, should_stop):  # never called: the records are scripted below
        raise AssertionError("the scripted backend has no model")

    def generate_batches(self, prompt, settings, stop=None):
        for record in self.scripted(prompt, settings):
            yield [record]

    def generate_rows(self, prompts, settings, stop=None):  # a batch: the rows scripted one after another
        for row, prompt in enumerate(prompts):
            for record in self.scripted(prompt, settings):
                yield [(row, record)]

    def scripted(self, prompt, settings):
        self.calls += 1
        rng = np.random.default_rng([sum(map(ord, prompt)), settings.seed])
        commit = np.clip(np.arange(24) // 4 + rng.integers(-2, 3, 24), 0, 7)
        entropy = float(rng.uniform(0.001, 0.1))
        correct = entropy < 0.05  # low entropy is right here: AUROC 1 within a regime
        trace = trace_from_commit_steps([commit.tolist()], n_steps=8, content_lengths=[20], step_budget=8)
        yield trace.start
        for step in trace.steps:
            yield dataclasses.replace(step, entropy_nats=np.full(24, entropy, np.float32))
        yield from trace.blocks
        numbers = [int(w) for w in prompt.rstrip("?").split() if w.isdigit()]
        yield dataclasses.replace(trace.end, text=str(sum(numbers)) if correct and numbers else "not sure")
