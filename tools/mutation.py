"""Mutation testing of the core modules, by hand (too slow for CI on two cores): docs/mutation.md.

    python tools/mutation.py                      # every mutant of every module, one module at a time
    python tools/mutation.py --sample 30          # a seeded random sample of 30 mutants per module
    python tools/mutation.py --module visualizer/states.py --sample 0   # one module, every mutant
    python tools/mutation.py --module backends/capture.py --only '*capture_steps*' --sample 40   # one function's
    python tools/mutation.py --report             # only the table, from the results mutants/ holds

mutmut (pinned in requirements-mutation.txt, configured in pyproject.toml's [tool.mutmut]) copies the
packages to mutants/, mutates the modules listed there and runs each mutant against only the tests
that reached the mutated function. Results stay in mutants/*.meta, so a run can be stopped and
resumed. The score is killed / (mutants tried - equivalent ones): a timeout counts as killed (the
tests noticed), "no tests" counts as survived (nothing reached the code).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tomllib
from collections import Counter
from fnmatch import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MUTANTS = ROOT / "mutants"
# The modules of the report: one line each; visualizer/metrics/ counts as one module.
# In the order they run: the capture last, its tests run a model (minutes per surviving mutant on 2 cores).
MODULES = {
    "visualizer/states.py": ["visualizer/states.py"],
    "visualizer/metrics/": ["visualizer/metrics/*.py"],
    "visualizer/live_stream.py": ["visualizer/live_stream.py"],
    "visualizer/trace_format.py": ["visualizer/trace_format.py"],
    "backends/logit_summary.py": ["backends/logit_summary.py"],
    "backends/capture.py": ["backends/capture.py"],
}
# Mutants that change nothing a caller can observe: left out of the score (docs/mutation.md says why).
# Names are mutmut's (`mutmut show NAME`); they shift when the function they are in changes.
EQUIVALENT = {
    "visualizer.states.x_frame_state__mutmut_2": "always recomputes frame_refs(trace) instead of using the refs passed in: the same refs, only slower",
    "visualizer.metrics.live.x_position_details__mutmut_15": "does not pass the refs on, so block_position_details recomputes the same refs",
    "visualizer.states.xǁFrameStateǁcount__mutmut_2": "indexes the states with None when no block is given: a new axis, the same count",
    "visualizer.states.x_frame_state__mutmut_47": "a step frame also marks its own block committed first; the step's row and tokens then overwrite that block entirely",
    "visualizer.metrics.stats.x_reliability_tertiles__mutmut_5": "drops dtype=float from the entropies: callers pass numbers (the probe's float entropies), whose cut points, tertiles and float() ranges are the same as ints or floats",
    "backends.capture.xǁ_LogitRecorderǁ__init____mutmut_3": "starts the recorder's summary as \"\" instead of None: the appended processor writes a summary before any step reads it",
    "backends.capture.x_capture_steps__mutmut_37": "starts the step counter at 1: every block resets it to 0 (prepare_denoiser_inputs) before its first step",
    "backends.capture.x_capture_steps__mutmut_104": "calls the original _prepare_denoiser_inputs without *args: transformers (5.23) passes every argument by keyword, so args is empty",
    "backends.capture.x_capture_steps__mutmut_200": "astype(bool) copies the row instead of viewing it: the host arrays are already private copies (_to_host), so only memory changes",
    "backends.capture.x_capture_steps__mutmut_210": "astype(np.int32, copy=True): as _200",
    "backends.capture.x_capture_steps__mutmut_203": "copy flag of a record's astype (True, None or left out): as _200",
    "backends.capture.x_capture_steps__mutmut_205": "copy flag of a record's astype (True, None or left out): as _200",
    "backends.capture.x_capture_steps__mutmut_217": "copy flag of a record's astype (True, None or left out): as _200",
    "backends.capture.x_capture_steps__mutmut_219": "copy flag of a record's astype (True, None or left out): as _200",
    "backends.capture.x_capture_steps__mutmut_221": "copy flag of a record's astype (True, None or left out): as _200",
    "backends.capture.x_capture_steps__mutmut_291": "copy flag of a record's astype (True, None or left out): as _200",
    "backends.capture.x_capture_steps__mutmut_293": "copy flag of a record's astype (True, None or left out): as _200",
    "backends.capture.x_capture_steps__mutmut_296": "copy flag of a record's astype (True, None or left out): as _200",
    "backends.capture.x_capture_steps__mutmut_252": "calls the original _finalize_canvas without *args: as _104",
    "backends.capture.x_capture_steps__mutmut_214": "copy flag of a record's astype (True, None or left out): as _200",
    "backends.capture.x_capture_steps__mutmut_40": "renames the initial \"settled\" key: every block sets \"settled\" (prepare_denoiser_inputs) before a step reads it",
    "backends.capture.x_capture_steps__mutmut_239": "settled = finished instead of settled |= finished: transformers' finished_denoising is itself cumulative within a block (it ORs the stopping rule in), so both give the same mask",
    "backends.capture.x_capture_steps__mutmut_103": "steps_used as float zeros: the counts stay whole numbers and int() gives the same steps_used",
    "backends.capture.x_capture_steps__mutmut_61": "recording() leaves the recorder's error as \"\" instead of None once it is held: once anything is held nothing more is recorded and only held[0] is raised, so the later recordings only hold a TypeError (raise \"\") after it",
    "backends.capture.xǁ_LogitRecorderǁ__init____mutmut_1": "hold defaults to True: the one caller, capture_steps, always passes hold= (agree is not None)",
    "backends.logit_summary.x_top_k__mutmut_1": "two_stage defaults to False: the one-stage torch.topk, whose candidates the two-stage search finds too (tests/test_logit_summary.py); only the time changes",
    "visualizer.metrics.stats.x_auroc__mutmut_32": "alternative=\"TWO-SIDED\": the U statistic does not depend on the alternative (only the p-value does), and scipy lowercases it anyway",
    "backends.logit_summary.x_top_k__mutmut_4": "reads the canvas length (shape[-2]) as the vocabulary, which only picks the one-stage path: the same candidates (a canvas of 8,192 or more, past MAX_CANVAS_LENGTH, would fail)",
    "backends.logit_summary.x_top_k__mutmut_8": "vocab / TOPK_CHUNK is never 0, so the one-stage torch.topk always runs: the same candidates, more slowly",
    "backends.logit_summary.x_top_k__mutmut_10": "8 / TOPK_CHUNK instead of 8 * TOPK_CHUNK only moves the threshold between the two paths: the same candidates",
    "backends.logit_summary.x_top_k__mutmut_11": "9 * TOPK_CHUNK: as _10",
    "backends.logit_summary.x_top_k__mutmut_17": "torch.topk without dim=-1: its default is the last axis",
    "backends.logit_summary.x_top_k__mutmut_34": "the first stage's torch.topk without dim=-1: as _17",
    "backends.logit_summary.x_summarize_in_torch__mutmut_14": "top_k(..., two_stage=None): the one-stage torch.topk, as top_k 1",
    "backends.logit_summary.x_summarize_in_torch__mutmut_17": "top_k(x, k) without two_stage=: its default, True, is what summarize_in_torch passes",
    "backends.logit_summary.x_summarize_in_torch__mutmut_1": "summarize_in_torch's two_stage defaults to False: as top_k 1",
    "backends.logit_summary.x_top_k__mutmut_3": "reads shape[+1] as the vocabulary (the canvas length for batched logits): as _4, it only picks the path",
    "backends.logit_summary.x_top_k__mutmut_7": "two_stage instead of not two_stage swaps the two paths: the same candidates",
    "backends.logit_summary.x_top_k__mutmut_9": "vocab <= 8 * TOPK_CHUNK: at exactly 8 slices the one-stage path, with the same candidates",
    "backends.logit_summary.x_top_k__mutmut_61": "the second stage's torch.topk without dim=-1: as _17",
    "visualizer.metrics.order.x_bin_tau_b__mutmut_32": "compares the bin means with means[1] instead of means[0]: there are at least two bins here (one bin returned above), and all means equal the first exactly when they all equal the second",
}
# Mutants of code that runs only on CUDA (or with Triton on a GPU): no test here can run them, so
# they are neither killed nor survivors; left out of the score and counted in their own column.
CPU_UNREACHABLE = {
    "backends.capture.x__to_host__mutmut_6": "t.to(None, ...) leaves a tensor where it is: the same on the CPU; a CUDA tensor would stay on the GPU and .numpy() fail",
    "backends.capture.x__to_host__mutmut_8": "t.to(non_blocking=...) without a device: as _6",
    "backends.logit_summary.x_top_k__mutmut_41": "torch.arange(..., device=None): the slice offsets on the CPU, where the logits are here; with CUDA logits the sum would fail",
    "backends.logit_summary.x_top_k__mutmut_45": "torch.arange without device=: as _41",
    "backends.capture.x__to_host__mutmut_9": "drops non_blocking: only a CUDA-to-CPU copy can be non-blocking (then one synchronize); on the CPU the copy is the tensor itself",
}
KILLED = {1, 3, 24, -24, 36, 152, 255}  # pytest failed, or the tests ran past their time (a hang the tests noticed)
SURVIVED = {0, 5, 33}  # the tests passed, or no test reached the mutated function


def module_files(module: str) -> list[Path]:
    return sorted(p for pattern in MODULES[module] for p in ROOT.glob(pattern))


def results(module: str) -> dict[str, int | None]:
    """{mutant name: exit code or None (not run)} for one module, from mutmut's meta files."""
    out: dict[str, int | None] = {}
    for path in module_files(module):
        meta = MUTANTS / (str(path.relative_to(ROOT)) + ".meta")
        if meta.is_file():
            out.update(json.loads(meta.read_text())["exit_code_by_key"])
    return out


def run_mutmut(names: list[str]) -> None:
    """Run these mutants, one at a time (two shared cores), niced, torch on one thread (tests/conftest.py)."""
    env = {**os.environ, "TEST_TORCH_THREADS": "1"}
    subprocess.run(["nice", "-n", "10", sys.executable, "-m", "mutmut", "run", "--max-children", "1", *names], cwd=ROOT, env=env, check=False)


def ensure_generated() -> None:
    """mutmut writes the mutants (and traces which tests reach which function) on its first run."""
    if not all(results(module) for module in MODULES):
        run_mutmut(["backends.logit_summary.*"])


def score_line(module: str) -> str:
    codes = results(module)
    left_out = EQUIVALENT.keys() | CPU_UNREACHABLE.keys()
    tried = {name: code for name, code in codes.items() if code is not None and name not in left_out}
    equivalent = sum(1 for name in codes if name in EQUIVALENT and codes[name] is not None)
    unreachable = sum(1 for name in codes if name in CPU_UNREACHABLE and codes[name] is not None)
    kinds = Counter("killed" if c in KILLED else "survived" if c in SURVIVED else "other" for c in tried.values())
    score = kinds["killed"] / len(tried) if tried else float("nan")
    return (f"| {module} | {len(codes)} | {len(tried) + equivalent + unreachable} | {equivalent} | {unreachable} | "
            f"{kinds['killed']} | {kinds['survived']} | {kinds['other']} | {score:.0%} |")


def report() -> None:
    print("| module | mutants | tried | equivalent | not reachable on CPU | killed | survived | other | killed % |")
    print("|---|---|---|---|---|---|---|---|---|")
    for module in MODULES:
        print(score_line(module))
    print()
    for module in MODULES:
        survivors = [n for n, c in results(module).items() if c in SURVIVED and n not in EQUIVALENT and n not in CPU_UNREACHABLE]
        if survivors:
            print(f"survived in {module}: " + " ".join(sorted(survivors)))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--module", choices=list(MODULES), action="append", help="default: every module")
    parser.add_argument("--sample", type=int, default=0, help="mutants per module, seeded (0: all of them)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", action="append", metavar="GLOB", help="only mutants whose name matches (fnmatch), before sampling")
    parser.add_argument("--report", action="store_true", help="only print the table")
    args = parser.parse_args(argv)
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]
    assert all(any(fnmatch(str(p.relative_to(ROOT)), g) for g in config["only_mutate"]) for m in MODULES for p in module_files(m))
    if not args.report:
        ensure_generated()
        for module in args.module or list(MODULES):
            names = sorted(n for n in results(module) if n not in EQUIVALENT and n not in CPU_UNREACHABLE)
            if args.only:
                names = [n for n in names if any(fnmatch(n, glob) for glob in args.only)]
            if args.sample:
                tried = {n for n, c in results(module).items() if c is not None}
                drawn = random.Random(f"{args.seed}:{module}").sample(names, min(args.sample, len(names)))
                names = sorted(set(drawn) | (tried & set(names)))
            # resumable: what has a verdict is not run again, except survivors (a new test may kill them)
            todo = [n for n, c in results(module).items() if n in names and (c is None or c in SURVIVED)]
            if todo:
                print(f"{module}: {len(todo)} mutants to run", flush=True)
                run_mutmut(todo)
    report()


if __name__ == "__main__":
    main()
