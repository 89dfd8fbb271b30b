"""How the page looks: its layout rules (CSS, and what Gradio's `css` cannot carry, in <head>), the theme and the
intro line.  Every launch passes `page_style()` (serve.py, the screenshots and browser tests, bench_live), so what is
tested and pictured is what is served."""

from __future__ import annotations

import gradio as gr

# One view holds the run (issue 58): the controls and the inspector in a narrow left column, the canvas and its
# readout in the wide right one; the lens grid shrinks to that column; on a phone the canvas comes first.
CSS = """
.dv-frame { max-height: 72vh; overflow: auto; container-type: inline-size; }  /* HEAD's container queries ask its width */
.dv-compare-cards { display: flex; flex-wrap: wrap; gap: 12px; }  /* A beside B; B under A when narrow, as the panes */
.dv-compare-card { flex: 1 1 300px; min-width: 0; }
.dv-message p { color: #f87171; font-weight: 600; }  /* each place's message (MESSAGES), beside what caused it */
/* a long model path or demo title ends in an ellipsis before the dropdown's arrow, never under it */
#dv-model-picker input, #dv-demo-picker input { padding-right: 28px; text-overflow: ellipsis; }
#dv-inspector svg { max-width: 100%; height: auto; }
#dv-run-card { margin-bottom: calc(-1 * var(--layout-gap)); }  /* the card sits on the canvas: no empty band under it */
#dv-run-card .html-container { padding-bottom: 0; }
#dv-inspector { overflow: auto; max-height: 40vh; }  /* a long answer (lens grid, trajectory) scrolls in place, beside the canvas */
@media (max-width: 720px) {  /* a phone: the two columns' parts in one, the live view first, then the prompt and Generate */
  #dv-main { flex-direction: column; }
  #dv-main > .column { display: contents; }
  #dv-live { order: -1; }
}
"""

# What Gradio's `css` cannot carry goes into the page's <head> as it is: `css` scopes every selector under
# `.gradio-container .contain` and drops an @container rule.
HEAD = """<style>
/* A frame too narrow for 16 cells a row (a phone, a compare pane) shows 8, in glyphs shrunk to fit its width: no
   sideways scroll.  The cells are spans separated by whitespace text, which a grid does not lay out; a block's rule
   spans the row, and 2px between rows keeps rows of one colour from reading as columns.  55ch = 8 cells of 6 characters and 7 gaps = 33.1em of DejaVu Sans Mono (0.602em a character). */
@container (max-width: 780px) {
  .dv-canvas[data-layout="grid"] { display: grid; grid-template-columns: repeat(8, 6ch); column-gap: 1ch; row-gap: 2px;
                                   font-size: min(12.5px, calc(100cqi / 33.2)); }
  .dv-canvas[data-layout="grid"] .dv-rule { grid-column: 1 / -1; overflow: hidden; }
  /* the text layout here is the server's narrow one (layout.NARROW_TEXT_COLUMNS = 44 columns = 26.5em): its glyphs
     as large as 13px allows in the frame's width; a line is still wrapped, never scrolled, should the font be wider */
  .dv-canvas[data-layout="text"] { white-space: pre-wrap !important; overflow-wrap: anywhere;
                                   font-size: min(13px, calc(100cqi / 26.6)); line-height: 1.5 !important; }
}
@media (max-width: 720px) {  /* a phone: the page's side margins go to the canvas */
  /* no scroll anchoring: when a run's canvas fills in, Chrome would keep the panels under it still and push the
     canvas, just scrolled into view by Generate, off the top */
  html, body { overflow-anchor: none; }
  .gradio-container { padding-left: 6px !important; padding-right: 6px !important; }
  .gradio-container .main { padding-left: 0 !important; padding-right: 0 !important; }
  #dv-live .html-container { padding-left: 0 !important; padding-right: 0 !important; }
  .dv-frame { padding: 8px !important; }
}
</style>
<script>
// On a phone Generate lies under the canvas: pressing it brings the canvas back into view for the run.
document.addEventListener("click", (event) => {
  if (event.target.closest("#dv-generate") && window.matchMedia("(max-width: 720px)").matches)
    document.querySelector("#dv-live")?.scrollIntoView({ block: "start" });
});
</script>"""


def page_style() -> dict:
    """How the page looks, as `launch`'s keywords: every launch (serve.py, the screenshots and browser tests,
    bench_live) passes these, so what is tested and pictured is what is served.

    The font is Gradio's own copy of Source Sans Pro in its two complete weights, served by the app (the same offline
    and online): Gradio's SemiBold file holds 9 glyphs, so a 600-weight heading drawn with it mixed in another
    font's bold for every other letter; with 400 and 700 only, bold text takes the 700 face."""
    font = (gr.themes.LocalFont("Source Sans Pro", weights=(400, 700)), "ui-sans-serif", "system-ui", "sans-serif")
    return {"css": CSS, "head": HEAD, "theme": gr.themes.Soft(font=font)}


# one line: the live view's own legend says what each colour means
INTRO = """## Watch DiffusionGemma denoise
Each frame is one denoising step of a 256-token canvas. Pick a demo prompt, press *Generate*, click a token for
the alternatives the model weighed there."""
