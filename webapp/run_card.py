"""What a run is, said small (issue 58): its card, and the two lines that would run it again.

    html = trace_card(trace)             # prompt (full on hover), model, sampler and changed knobs, seed, steps, pins, branch
    line = cli_line(trace.prompt, trace.model.source, trace.settings.to_dict())   # `python -m visualizer record ...`
    call = client_call(trace.prompt, trace.model.name, trace.settings.to_dict())  # gradio_client's `/generate`

Pure functions of a run's metadata (no Gradio); the compare panes call `run_card_html` for each side.
"""

from __future__ import annotations

import html
import shlex

from visualizer.settings import KNOBS

PROMPT_SHOWN = 80  # characters of the prompt on the card; the whole prompt is its hover text
SHOWN_APART = ("seed", "sampler", "pins", "layers")  # said on their own line, not among "knobs changed"


def changed_knobs(settings: dict) -> dict:
    """The knobs of `settings` that differ from both the field's default and the documented one (None: the model's own)."""
    changed = {}
    for name, value in settings.items():
        knob = KNOBS.get(name)
        if knob is None or not knob.in_app or value is None or value in ((), []) or value == knob.field_default:
            continue
        if knob.shown_default is not None and value == knob.shown_default:
            continue
        changed[name] = value
    return changed


def _plain(value) -> str:
    return ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


def run_card_html(prompt: str, model: str, settings: dict, *, steps: int | None = None, blocks: int | None = None,
                  branch=None, parent: str | None = None, warm_start=None) -> str:
    """The card as small HTML, every value escaped (a prompt or pin text is a visitor's); `parent` names a branch's
    parent run as the session's tree does ("root", "branch 1")."""
    esc = html.escape
    short = prompt if len(prompt) <= PROMPT_SHOWN else prompt[:PROMPT_SHOWN - 1] + "…"
    sampler = settings.get("sampler") or "the model's default"
    knobs = ", ".join(f"{KNOBS[name].label} {_plain(value)}" for name, value in changed_knobs(settings).items()
                      if name not in SHOWN_APART)
    rows = [f'<div class="dv-card-prompt" title="{esc(prompt, quote=True)}"><b>{esc(short)}</b></div>',
            f"<div>model {esc(model)} · sampler {esc(str(sampler))} · seed {esc(str(settings.get('seed') or 0))}</div>"]
    if knobs:
        rows.append(f"<div>knobs changed: {esc(knobs)}</div>")
    if steps is not None:
        rows.append(f"<div>{steps} step{'' if steps == 1 else 's'} over {blocks or 0} block{'' if blocks == 1 else 's'}</div>")
    pins, layers = settings.get("pins") or (), settings.get("layers")
    if pins:
        rows.append(f"<div>pins: {esc('; '.join(f'{pos}={text}' for pos, text in pins))}</div>")
    if layers:
        rows.append(f"<div>layers: {esc(_plain(layers))}</div>")
    if branch is not None:
        named = f"{esc(parent)} (sha256 {esc(branch.parent[:12])})" if parent else esc(branch.parent[:12])
        rows.append(f"<div>branch of {named} at block {branch.block}, step {branch.step}: "
                    f"{esc('; '.join(branch.interventions) or 'no intervention')}</div>")
    if warm_start is not None and warm_start.source is not None:  # where a warm start's first canvas came from
        named = f"{esc(parent)} (sha256 {esc(warm_start.source[:12])})" if parent else esc(warm_start.source[:12])
        rows.append(f"<div>started from the canvas of {named} at block {warm_start.block}, step {warm_start.step}: "
                    f"{len(warm_start.placed)} token{'' if len(warm_start.placed) == 1 else 's'} placed</div>")
    if warm_start is not None and warm_start.texts:  # text placed on the first canvas (over a run's canvas, or alone)
        rows.append(f"<div>first canvas {'also ' if warm_start.source else ''}given the text "
                    f"{esc('; '.join(warm_start.texts))}, not held</div>")
    return f'<div class="dv-run-card">{"".join(rows)}</div>'


def trace_card(trace, parent: str | None = None) -> str:
    """The card of a recorded (or running) trace; `parent`: a branch's parent's name in the session."""
    return run_card_html(trace.prompt, trace.model.name, trace.settings.to_dict(), steps=len(trace.steps),
                         blocks=len(trace.blocks), branch=trace.branch, parent=parent,
                         warm_start=trace.warm_start)


def _flags(settings: dict) -> list[str]:
    """The `record` flags that give back `settings`' knobs (every one that is not the default)."""
    words = []
    for name, value in settings.items():
        knob = KNOBS.get(name)
        if knob is None or not knob.in_app and value == knob.field_default:
            continue
        if knob.kind is bool:
            if bool(value) != bool(knob.field_default):
                words.append(knob.cli_flag)
        elif knob.form is not None:
            if value:
                lines = knob.form.format(value).splitlines() if knob.form.repeat else [knob.form.format(value)]
                for line in lines:
                    words += [knob.cli_flag, line]
        elif value is not None and value != knob.field_default:
            words += [knob.cli_flag, str(value)]
    return words


def cli_line(prompt: str, source: str | None, settings: dict, out: str = "run.json") -> str:
    """The `python -m visualizer record` line that runs this again (shell-quoted)."""
    words = ["python", "-m", "visualizer", "record", "--prompt", prompt]
    if source:
        words += ["--model", source]
    return shlex.join([*words, *_flags(settings), "--out", out])


def client_call(prompt: str, model: str, settings: dict, url: str = "http://127.0.0.1:7860/") -> str:
    """The gradio_client call of the `/generate` API with the same knobs (the widgets' text for a structured one)."""
    keywords = []
    for name, value in settings.items():
        knob = KNOBS.get(name)
        if knob is None or not knob.in_app or value is None:
            continue
        if knob.form is not None:
            value = knob.form.format(value)
        keywords.append(f"{name}={value!r}")
    args = ", ".join([repr(prompt), repr(model), *keywords])
    return f'from gradio_client import Client\nClient({url!r}).predict({args}, api_name="/generate")'
