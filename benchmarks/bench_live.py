"""The live view over the wire: the real app in headless Chromium, fed by a stand-in backend that
replays a recorded trace at a fixed rate (25 or 50 steps per second, as a GPU makes them).

For each run it reports, all from this one process tree:
  - bytes per frame received by the browser during the run: Chrome DevTools `Network.dataReceived`
    on every response (Gradio's SSE stream of the live view's updates, which is not compressed,
    and the small follow-up call), SSE framing and JSON escaping included;
  - server CPU per frame: user + system time of the app's process (every thread: Gradio, the
    generator, the stand-in backend) from the click to the final frame on screen, divided by frames;
    and the same less what the app costs while idle (page open, no run; Gradio's event loop and
    queue wake up on their own) over the run's wall time: the CPU the run and its live view added;
  - frames drawn by the browser against frames emitted (the browser draws once per animation
    frame, the newest frame only: fewer draws than frames means it skipped stale ones);
  - lag from the last record leaving the backend to the final frame on screen (same machine
    clock for both);
  - after each run, the token inspector's round trip: a token clicked on the canvas until the
    inspector shows its answer (the view's `inspect` ask, a queued Gradio event; browser clock),
    the median of up to 5 clicks (one when the trace recorded no candidates: every answer is the same).
It also prints, for the same trace, what the old server-rendered live view cost per frame
(canvas + panel HTML bytes and render time, sampled on every 8th frame) and the encoder's own
time per frame, so the ratios come from one run.

    python -m benchmarks.bench_live                          # records a 4-block run first (no-EOS random model)
    python -m benchmarks.bench_live --trace run.json --rates 25 50 --repeats 2
    python -m benchmarks.bench_live serve --trace T --rate 25 --port 7870 --events E   # (used internally)

The 4-block trace is recorded with the deterministic random-weight model whose EOS logits are
pinned to zero (as tests/conftest.py builds it), so all four 256-token blocks run; the 1-block
figures replay assets/traces/story.json (built-in model, 44 steps).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
from visualizer.records import StepRecord
from visualizer.trace import Trace

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
STATS = "() => window.dvLiveView && window.dvLiveView.stats()"
ASK_POSITIONS = (5, 37, 69, 101, 133)  # tokens of the first block, clicked after each run
# click a token, resolve once the inspector's text changes (its answer), in ms of the browser's clock
ASK = """(i) => new Promise((resolve, reject) => {
  const box = document.querySelector("#dv-inspector"), before = box.textContent;
  const seen = new MutationObserver(() => { if (box.textContent !== before) { seen.disconnect(); resolve(performance.now() - t0); } });
  seen.observe(box, { childList: true, subtree: true, characterData: true });
  setTimeout(() => { seen.disconnect(); reject(new Error(`no answer to the ask for token ${i}`)); }, 30000);
  const t0 = performance.now();
  document.querySelector(`.dv-canvas span[data-i="${i}"]`).click();
})"""
IDLE_S = 4  # seconds of the app idle (page open, no run) to measure its CPU floor


# ---- the stand-in backend and its server ------------------------------------------------------------
class ReplayBackend:
    """Yields a recorded trace's records at `rate` steps per second, like a backend on a GPU."""

    def __init__(self, trace: Trace, rate: float, events: Path):
        self.trace, self.rate, self.events, self.info = trace, rate, events, trace.model

    def default_settings(self):
        return self.trace.settings

    def supports_thinking(self) -> bool:
        return False  # it replays what was recorded; the knob stays off

    def pinned_ids(self, settings) -> tuple:
        return ()  # the app's validator asks; a replay holds no pins

    def check(self, prompt, settings) -> list[int]:
        return []  # nor a prompt to fit in a context

    @property
    def capabilities(self):
        """One sampler, the recorded one, and no knob: it replays what was recorded."""
        from backends.base import Capabilities
        from visualizer.samplers import SamplerSpec

        name = self.trace.settings.sampler or "entropy-bound"
        return Capabilities(knobs=frozenset(), samplers=(SamplerSpec(name, "replayed from a trace", self.trace.sampler_rule),))

    def generate_batches(self, prompt, settings, stop: threading.Event | None = None):
        """As `Backend.generate_batches` hands them out: the records arrive on a worker thread and
        each list holds whatever arrived since the last one."""
        arrived: queue.Queue = queue.Queue()
        done = object()
        worker = threading.Thread(target=lambda: [*map(arrived.put, self.generate(prompt, settings, stop)), arrived.put(done)])
        worker.start()
        try:
            while True:
                batch = [arrived.get()]
                while batch[-1] is not done and not arrived.empty():
                    batch.append(arrived.get())
                finished = batch[-1] is done
                if finished:
                    batch.pop()
                if batch:
                    yield batch
                if finished:
                    return
        finally:
            worker.join()

    def generate(self, prompt, settings, stop: threading.Event | None = None):
        trace = self.trace
        yield trace.start
        records = []
        for block in sorted({s.block for s in trace.steps}):
            records += trace.block_steps(block) + [b for b in trace.blocks if b.block == block]
        start, steps = time.perf_counter(), 0
        for record in records:
            if isinstance(record, StepRecord):
                delay = start + steps / self.rate - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                steps += 1
            if stop is not None and stop.is_set():
                break
            yield record
        last = time.time()
        self.events.write_text(json.dumps({"last_record_at": last, "steps": steps}))
        yield trace.end


class StandInModels:
    def __init__(self, backend):
        self.backend = backend

    def get(self, source, kind=None):  # the app asks for a model on a backend kind (None: its own) since 52737f9
        return self.backend

    def loaded(self, source, kind=None):
        return True


def serve(args) -> None:
    from webapp import app as app_module
    from webapp.page import page_style
    from webapp.serve import queue_app

    trace = Trace.load(args.trace)
    # the app's model slot: its handlers and its check before the queue see the stand-in as loaded
    app_module.MODELS = StandInModels(ReplayBackend(trace, args.rate, Path(args.events)))
    queue_app(app_module.build_app("replay")).launch(
        server_port=args.port, quiet=True, **page_style()
    )


# ---- the 4-block trace ---------------------------------------------------------------------------
def record_four_block_trace(folder: Path) -> Path:
    import torch
    from transformers import DiffusionGemmaForBlockDiffusion

    from backends.random_model import build_random_model
    from backends.run import record_trace
    from backends.transformers_backend import TransformersBackend
    from training.tokenizer import EOS_TOKEN_IDS
    from visualizer.settings import GenerationSettings

    torch.set_num_threads(2)
    model_dir = build_random_model(folder / "random-no-eos")
    model = DiffusionGemmaForBlockDiffusion.from_pretrained(model_dir)
    with torch.no_grad():
        model.get_output_embeddings().weight[EOS_TOKEN_IDS] = 0.0  # every block runs to its end
    model.save_pretrained(model_dir)
    backend = TransformersBackend(str(model_dir), device="cpu")
    trace = record_trace(backend, "Tell me a long story about the sea.", GenerationSettings(max_new_tokens=1024, max_denoising_steps=48, seed=0))
    return trace.save(folder / "four-blocks.json")


# ---- measuring -------------------------------------------------------------------------------------
def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, all its threads (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_http(url: str, proc, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the app exited (code {proc.returncode})")
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except OSError:
            time.sleep(0.5)
    raise SystemExit("the app did not start")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def measure(trace_path: Path, rate: float, repeats: int) -> list[dict]:
    from playwright.sync_api import sync_playwright

    from visualizer.alternatives import NO_CANDIDATES, alternatives_html
    from visualizer.states import frame_refs

    trace = Trace.load(trace_path)
    frames = len(frame_refs(trace))
    asks = ASK_POSITIONS if NO_CANDIDATES not in alternatives_html(trace, 0, 0) else ASK_POSITIONS[:1]
    port = free_port()  # a fresh port per server: never a previous run's server answering
    events = Path(tempfile.mkdtemp(prefix="bench-live-")) / "events.json"
    log = events.with_name("server.log")
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.bench_live", "serve", "--trace", str(trace_path), "--rate", str(rate), "--port", str(port),
         "--events", str(events)],
        stdout=log.open("w"), stderr=subprocess.STDOUT, cwd=ROOT,
    )
    results = []
    try:
        url = f"http://127.0.0.1:{port}/"
        wait_http(url, proc)
        time.sleep(1)
        if proc.poll() is not None:
            raise SystemExit(f"the app exited: {log.read_text()[-2000:]}")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            page = browser.new_page(viewport={"width": 1500, "height": 1000})
            page.goto(url)
            page.get_by_text("vocab").first.wait_for(timeout=60_000)
            cdp = page.context.new_cdp_session(page)
            cdp.send("Network.enable")
            received = {"data": 0, "on": False}

            def on_data(event):
                if received["on"]:
                    received["data"] += event.get("dataLength", 0)

            cdp.on("Network.dataReceived", on_data)
            # the app's CPU while it waits, page open, no run: Gradio's event loop costs this whatever the view does
            idle_before, idle_at = cpu_seconds(proc.pid), time.perf_counter()
            time.sleep(IDLE_S)
            idle_rate = (cpu_seconds(proc.pid) - idle_before) / (time.perf_counter() - idle_at)
            for _ in range(repeats):
                events.unlink(missing_ok=True)
                received.update(data=0, on=True)
                cpu_before, wall_before = cpu_seconds(proc.pid), time.perf_counter()
                runs = (page.evaluate(STATS) or {}).get("runs", 0)
                page.get_by_role("button", name="Generate").click()
                page.wait_for_function(
                    f"() => {{ const s = window.dvLiveView.stats(); return s && s.runs === {runs + 1} && s.ended && s.shownFrames === {frames} && s.shownIndex === {frames - 1}; }}",
                    timeout=600_000, polling=20,
                )
                cpu_after, wall = cpu_seconds(proc.pid), time.perf_counter() - wall_before
                stats = page.evaluate(STATS)
                page.wait_for_timeout(1500)  # the follow-up call (committed text) and the stream's close
                received["on"] = False
                for _ in range(300):
                    if events.exists():
                        break
                    time.sleep(0.1)
                else:
                    raise SystemExit(f"the stand-in backend did not report its run; browser stats: {stats}; server log: {log.read_text()[-2000:]}")
                emitted = json.loads(events.read_text())
                ask_ms = [page.evaluate(ASK, i) for i in asks]
                page.evaluate(f"() => document.querySelector('.dv-canvas span[data-i=\"{asks[-1]}\"]').click()")  # unpicked: the next run's end asks nothing for it
                results.append({
                    "frames": frames, "rate": rate, "bytes_per_frame": received["data"] / frames,
                    "server_cpu_ms_per_frame": (cpu_after - cpu_before) * 1000 / frames,
                    "above_idle_ms_per_frame": (cpu_after - cpu_before - idle_rate * wall) * 1000 / frames,
                    "idle_ms_per_s": idle_rate * 1000,
                    "frames_drawn": stats["framesShown"], "lag_ms": stats["lastShownAt"] - emitted["last_record_at"] * 1000,
                    "browser_ms_per_frame": (stats["receiveMs"] + stats["drawMs"]) / frames, "updates": stats["receives"],
                    "ask_ms": statistics.median(ask_ms),
                })
                page.wait_for_timeout(500)
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return results


def offline_costs(trace_path: Path) -> dict:
    """The encoder's time per frame, and what the old server-rendered view sent and cost per frame."""
    from webapp.views import render_view
    from visualizer.live_stream import replay_log
    from visualizer.states import frame_refs

    trace = Trace.load(trace_path)
    refs = frame_refs(trace)
    start = time.perf_counter()
    log = replay_log(trace)
    encode_ms = (time.perf_counter() - start) * 1000 / len(refs)
    sample = list(range(0, len(refs), 8))
    start = time.perf_counter()
    html_bytes = [sum(len(part.encode()) for part in render_view(trace, i, "standard", "grid")) for i in sample]
    html_ms = (time.perf_counter() - start) * 1000 / len(sample)
    return {"log_bytes_per_frame": len(log.encode()) / len(refs), "encode_ms_per_frame": encode_ms,
            "html_bytes_per_frame": statistics.mean(html_bytes), "html_ms_per_frame": html_ms}


def report(name: str, trace_path: Path, rates, repeats: int) -> None:
    trace = Trace.load(trace_path)
    print(f"\n## {name}: {trace.max_blocks} block(s) x {trace.canvas_length} tokens, {len(trace.steps)} steps, from {trace_path.name}")
    costs = offline_costs(trace_path)
    print(f"old server-rendered view: {costs['html_bytes_per_frame'] / 1024:.1f} KB and {costs['html_ms_per_frame']:.1f} ms CPU per frame "
          f"(every 8th frame); live log: {costs['log_bytes_per_frame'] / 1024:.2f} KB and {costs['encode_ms_per_frame']:.2f} ms per frame "
          f"-> {costs['html_bytes_per_frame'] / costs['log_bytes_per_frame']:.0f}x fewer bytes")
    print("| steps/s | frames | KB/frame received | server CPU ms/frame | of which above idle | app idle CPU ms/s | updates seen by the view | frames drawn | view JS ms/frame | final-frame lag ms | token ask ms |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for rate in rates:
        for r in measure(trace_path, rate, repeats):
            print(f"| {rate:g} | {r['frames']} | {r['bytes_per_frame'] / 1024:.2f} | "
                  f"{r['server_cpu_ms_per_frame']:.2f} | {r['above_idle_ms_per_frame']:.2f} | {r['idle_ms_per_s']:.0f} | {r['updates']} | {r['frames_drawn']} | {r['browser_ms_per_frame']:.2f} | {r['lag_ms']:.0f} | {r['ask_ms']:.0f} |", flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command")
    s = sub.add_parser("serve")
    s.add_argument("--trace", required=True)
    s.add_argument("--rate", type=float, required=True)
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--events", required=True)
    parser.add_argument("--trace", help="a recorded multi-block trace (default: record a 4-block one first)")
    parser.add_argument("--rates", type=float, nargs="*", default=[25, 50])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    if args.command == "serve":
        return serve(args)
    if args.trace:
        four = Path(args.trace)
    else:
        print("recording a 4-block trace with the no-EOS random model on the CPU...", flush=True)
        four = record_four_block_trace(Path(tempfile.mkdtemp(prefix="bench-live-trace-")))
    report("4 blocks", four, args.rates, args.repeats)
    report("1 block", ROOT / "assets" / "traces" / "story.json", args.rates[:1], args.repeats)


if __name__ == "__main__":
    main()
