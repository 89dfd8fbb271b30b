"""Colours of the canvas, shared by the HTML and the Pillow renderers.

Dark background, as in the visualizer post: noise gray, new green, kept draft purple, remasked
gray with an orange mark, committed white.  The colour-blind-safe palette uses Okabe-Ito hues
(orange for new, sky blue for kept, vermillion marks), which stay apart under the common
colour-vision deficiencies.

    palette = get_palette("standard")      # or "colorblind"
    palette.colors(State.NEW)              # (foreground, background) as '#rrggbb'
"""

from __future__ import annotations

from dataclasses import dataclass

from .states import State


@dataclass(frozen=True)
class Palette:
    name: str
    background: str  # page / frame background
    foreground: str  # captions, legend text
    muted: str  # block headers, secondary text
    rule: str  # block boundary lines
    noise: tuple[str, str]  # (glyph colour, cell colour)
    new: tuple[str, str]
    kept: tuple[str, str]
    remasked: tuple[str, str]
    committed: tuple[str, str]
    empty: tuple[str, str]  # positions of blocks the run has not reached
    mark: str  # the remasked marker and the "resampled token changed" dot
    special: str  # EOS and pad glyphs on committed cells
    thought: tuple[str, str] = ("#7dd3fc", "#0ea5e9")  # thinking channel: (committed text tint, band under the cell)
    pin: str = "#f472b6"  # the bar left of a pinned position (record --pin): a hand's token, not a sampler state

    def colors(self, state: State) -> tuple[str, str]:
        return {
            State.EMPTY: self.empty,
            State.NOISE: self.noise,
            State.NEW: self.new,
            State.KEPT: self.kept,
            State.REMASKED: self.remasked,
            State.COMMITTED: self.committed,
        }[State(state)]


STANDARD = Palette(
    name="standard",
    background="#0f1117",
    foreground="#e5e7eb",
    muted="#8b93a1",
    rule="#2d3340",
    noise=("#4b5563", "#1b1f28"),
    new=("#04150a", "#22c55e"),
    kept=("#f5f3ff", "#7c3aed"),
    remasked=("#6b7280", "#1b1f28"),
    committed=("#f8fafc", "#0f1117"),
    empty=("#262b36", "#0f1117"),
    mark="#f59e0b",
    special="#6b7280",
    thought=("#7dd3fc", "#0ea5e9"),  # sky blue: apart from the green, purple and amber marks
    pin="#f472b6",  # pink: apart from the four states, the amber marks and the sky-blue thought band
)

COLORBLIND = Palette(
    name="colorblind",
    background="#0f1117",
    foreground="#e5e7eb",
    muted="#8b93a1",
    rule="#2d3340",
    noise=("#4b5563", "#1b1f28"),
    new=("#1a1200", "#e69f00"),  # Okabe-Ito orange
    kept=("#03121c", "#56b4e9"),  # Okabe-Ito sky blue
    remasked=("#6b7280", "#1b1f28"),
    committed=("#f8fafc", "#0f1117"),
    empty=("#262b36", "#0f1117"),
    mark="#d55e00",  # Okabe-Ito vermillion
    special="#6b7280",
    thought=("#e6b3d3", "#cc79a7"),  # Okabe-Ito reddish purple: apart from orange, sky blue and vermillion
    pin="#f0e442",  # Okabe-Ito yellow
)

PALETTES = {p.name: p for p in (STANDARD, COLORBLIND)}
THOUGHT_LABEL = "thought"  # legend entry, shown when a frame holds thinking-channel tokens
PIN_LABEL = "pinned"  # legend entry, shown when the run pinned tokens (record --pin)
RESAMPLED_LABEL = "resampled to a new token"  # legend entry for the mark under a kept draft whose sample changed
PAD_LABEL = "padding"  # legend entry for the pad token's glyph (layout.PAD_GLYPH), apart from a space's dot
PIN_BAR_PX = 3  # width of the bar left of a pinned cell
THOUGHT_BAND_PX = 4  # height of the band under a thought cell (the resampled mark's 2 px sit on top of it)

LEGEND = (
    (State.NOISE, "noise"),
    (State.NEW, "new this step"),
    (State.KEPT, "kept draft"),
    (State.REMASKED, "remasked"),
    (State.COMMITTED, "committed"),
)


def get_palette(name: str) -> Palette:
    try:
        return PALETTES[name]
    except KeyError:
        raise ValueError(f"unknown palette {name!r}; choose one of: {', '.join(PALETTES)}") from None
