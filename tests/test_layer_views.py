"""The library side of layers, the shift and pins, without a model: trace format v4 and v5, validation, the metrics
leaving pins out, the SVG views and the CLI (`record --pin/--layers` refusals, the `layers` command)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cli.main import main
from tests.trace_factory import INSIDE_COMMITS as COMMITS
from tests.trace_factory import inside_trace, trace_from_commit_steps
from visualizer.layer_charts import kl_heatmap_svg, layer_rms_svg, lens_rank_svg
from visualizer.metrics import run_metrics
from visualizer.settings import GenerationSettings
from visualizer.trace import Trace, TraceError


def test_version_5_round_trips_exactly():
    trace = inside_trace()
    again = Trace.from_json(trace.to_json())
    assert again == trace and again.to_json() == trace.to_json()
    assert again.start.pins == ((2, 30),) and again.settings.pins == ((2, "x"),) and again.settings.layers == (0, 3)
    assert again.steps[0].kl_nats is None and again.steps[1].kl_nats.dtype == np.float32
    assert again.steps[2].layer_rms.shape == (2, 8) and again.blocks[0].lens_top_probs.dtype == np.float16
    assert again.blocks[0].lens_ranks.shape == again.blocks[0].lens_top_ids.shape == (6, 2, 8)
    assert not again.blocks[0].lens_ranks.flags.writeable


def as_version_4(data: dict) -> dict:
    """A version-5 trace dict written as version 4 wrote it: each step's lens top ids and probabilities in the step."""
    for block in data["blocks"]:
        ids, probs = block.pop("lens_top_ids"), block.pop("lens_top_probs")
        mine = [s for s in data["steps"] if s["block"] == block["block"]]
        for step, step_ids, step_probs in zip(mine, ids, probs, strict=True):
            step.update(lens_top_ids=step_ids, lens_top_probs=step_probs)
    return {**data, "version": 4}


def test_a_version_4_trace_loads_with_its_steps_lens_in_the_block():
    trace = inside_trace()
    old = as_version_4(json.loads(trace.to_json()))
    assert "lens_top_ids" in old["steps"][0] and "lens_top_ids" not in old["blocks"][0]
    again = Trace.from_dict(old)
    assert again == trace and again.to_json() == trace.to_json()  # saved again, it is a version-5 file
    broken = as_version_4(json.loads(trace.to_json()))
    broken["steps"][4].pop("lens_top_probs")
    with pytest.raises(TraceError, match="version-4 step of this block has no lens_top_ids"):
        Trace.from_dict(broken)
    newer = json.loads(trace.to_json())  # version 5 keeps the lens in the block only
    newer["steps"][1]["lens_top_ids"] = newer["blocks"][0]["lens_top_ids"][1]
    with pytest.raises(TraceError, match="lens_top_ids"):
        Trace.from_dict(newer)


def test_an_older_trace_loads_as_a_run_without_them():
    data = json.loads(trace_from_commit_steps(COMMITS, n_steps=6).to_json())
    data["version"] = 3
    trace = Trace.from_dict(data)
    assert trace.settings.record_shift is False and trace.settings.pins == () and trace.settings.layers is None
    assert "no shift" in kl_heatmap_svg(trace, 0) and "recorded no layers" in layer_rms_svg(trace, 0)


def _bad(change) -> str:
    data = json.loads(inside_trace().to_json())
    change(data)
    return json.dumps(data)


BAD = {
    "kl missing": (lambda d: d["steps"][3].pop("kl_nats"), "no kl_nats"),
    "kl negative": (lambda d: d["steps"][3]["kl_nats"].__setitem__(0, -0.5), "at least 0"),
    "kl without the setting": (lambda d: d["settings"].update(record_shift=False), "record_shift is off"),
    "rms missing": (lambda d: d["steps"][1].pop("layer_rms"), "no layer_rms"),
    "rms wrong layer count": (lambda d: d["steps"][1]["layer_rms"].pop(), "2 lists of 8"),
    "lens ids alone": (lambda d: d["blocks"][0].pop("lens_top_probs"), "come together"),
    "lens id out of vocab": (lambda d: d["blocks"][0]["lens_top_ids"][2][0].__setitem__(0, 10**6), "values from 0 to"),
    "lens prob above 1": (lambda d: d["blocks"][0]["lens_top_probs"][2][0].__setitem__(0, 2.0), "from 0 to 1"),
    "lens prob not a number": (lambda d: d["blocks"][0]["lens_top_probs"][2][0].__setitem__(0, "x"), "hold numbers"),
    "ranks short": (lambda d: d["blocks"][0]["lens_ranks"].pop(), "lens_ranks must be 6 steps"),
    "ranks without layers": (lambda d: [s.pop("layer_rms") for s in d["steps"]] and d["settings"].update(layers=None),
                             "settings.layers is off"),
    "layer beyond the model": (lambda d: d["settings"].update(layers=[0, 9]), "model.layers is 4"),
    "pins unsorted": (lambda d: d.update(pins=[[5, 30], [2, 30]]) or d["settings"].update(pins=[[5, "x"], [2, "y"]]), "sorted"),
    "pin outside canvas": (lambda d: d.update(pins=[[8, 30]]), "position from 0 to 7"),
    "pins without settings": (lambda d: d["settings"].update(pins=[]), "come together"),
    "pin text empty": (lambda d: d["settings"].update(pins=[[2, ""]]), "empty text"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_layer_pin_and_shift_parts_are_refused_in_one_line(case):
    change, message = BAD[case]
    with pytest.raises(TraceError, match=message) as info:
        Trace.from_json(_bad(change))
    assert "\n" not in str(info.value)


def test_metrics_leave_pinned_positions_out_and_say_so():
    pinned = inside_trace(pins=((0, 30), (7, 31)))
    plain = inside_trace(pins=())
    m, p = run_metrics(pinned), run_metrics(plain)
    assert m.pinned_tokens == 2 and p.pinned_tokens == 0
    assert m.measured_tokens == p.measured_tokens - 2
    assert "2 pinned tokens excluded" in m.measured and "pinned" not in p.measured
    assert m.blocks[0].measured_positions == list(range(1, 7))
    # tau_b of the six unpinned positions, in their order: the hand-made commit steps 1, 1, 2, 3, 3, 4
    from scipy.stats import kendalltau

    assert m.tau_b_mean == pytest.approx(kendalltau(np.arange(6), [1, 1, 2, 3, 3, 4], variant="b").statistic)


def test_views_are_pure_and_mark_the_pins():
    trace = inside_trace()
    rms = layer_rms_svg(trace, 0)
    assert rms == layer_rms_svg(Trace.from_json(trace.to_json()), 0)  # replayed = live
    assert rms.count("<image") == 3  # one panel per layer + the shared legend
    assert ">L0<" in rms and ">L3<" in rms and "pinned position 2" in rms
    kl = kl_heatmap_svg(trace, 0)
    assert "pinned position 2" in kl and "step 1: no step before it" in kl
    grid = lens_rank_svg(trace, 0, 2)
    assert "rank of the committed token" in grid and "pinned position" in grid
    assert grid.count("<rect") == 6 * 2  # a hover cell per layer and step
    assert "recorded no layers" in lens_rank_svg(inside_trace(layers=()), 0, 2)


def _panel_alpha(svg: str) -> np.ndarray:
    """The alpha channel of the first layer's RMS picture in `svg` (rows: steps, columns: positions)."""
    import base64
    import io
    import re

    from PIL import Image

    encoded = re.search(r'href="data:image/png;base64,([^"]+)"', svg).group(1)
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(encoded))).convert("RGBA"))[..., 3]


def test_a_block_still_denoising_fills_its_rms_panel_downwards():
    finished = inside_trace()
    live = Trace(model=finished.model, prompt=finished.prompt)  # the same run, read after its third step
    live.append(finished.start)
    for s in finished.steps[:3]:
        live.append(s)
    budget = finished.start.settings["max_denoising_steps"]
    alpha = _panel_alpha(layer_rms_svg(live, 0))
    assert alpha.shape == (budget, 8) and budget > 3  # a row for each step of the budget, in the geometry it ends with
    assert (alpha[:3] == 255).all() and (alpha[3:] == 0).all()  # the steps recorded so far, the rest empty
    assert ">step 3<" in layer_rms_svg(live, 0)
    # once committed, the block's steps fill the panel
    alpha = _panel_alpha(layer_rms_svg(finished, 0))
    assert alpha.shape == (len(finished.block_steps(0)), 8) and (alpha == 255).all()


# ---- the command line -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "argv, message",
    [
        (["--pin", "5"], "POS=TEXT"),
        (["--pin", "x=sea"], "POS=TEXT"),
        (["--pin", "5="], "empty text"),
        (["--layers", "0,a"], "layer numbers"),
        (["--layers", "1,1"], "layer 1 is asked for twice"),
    ],
)
def test_record_refuses_bad_pins_and_layers_in_one_line(argv, message, capsys, tmp_path):
    code = main(["record", "--prompt", "hi", "--out", str(tmp_path / "x.json"), *argv])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and message in err and err.count("\n") == 1


def test_layers_command_writes_the_three_views(tmp_path, capsys):
    path = inside_trace().save(tmp_path / "run.json")
    views = tmp_path / "views" / "new"  # made, as the docs' command expects
    assert main(["layers", str(path), "--out-dir", str(views)]) == 0
    for name in ("layer_rms.svg", "shift.svg", "lens_rank.svg"):
        assert (views / name).read_text().startswith("<svg")
    assert "lens position 2" in capsys.readouterr().err  # the first pinned position by default
    assert main(["layers", str(path), "--out-dir", str(path)]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err
    assert main(["layers", str(path), "--out-dir", str(tmp_path), "--position", "99"]) == 2
    assert "--position must be from 0 to 7" in capsys.readouterr().err


def test_settings_round_trip_pins_and_layers_as_json():
    settings = GenerationSettings(pins=((3, "sea"), (9, "}")), layers=(0, 29))
    data = json.loads(json.dumps(settings.to_dict()))
    assert GenerationSettings.from_dict(data) == settings and settings.problems() == []
    assert "empty text" in GenerationSettings(pins=((1, ""),)).problems()[0]
    assert "outside the canvas" in GenerationSettings(pins=((-2, "a"),)).problems()[0]
    assert "layer 3 is asked for twice" in GenerationSettings(layers=(3, 3)).problems()[0]


# ---- pinned positions in the frames ---------------------------------------------------------------
def _pin_columns(image, color: str) -> set[int]:
    """The x of every pixel drawn in exactly the pin colour."""
    from PIL import ImageColor

    rgb = np.asarray(image.convert("RGB"))
    return set(np.flatnonzero((rgb == ImageColor.getrgb(color)).all(axis=2).any(axis=0)).tolist())


@pytest.mark.parametrize("palette", ["standard", "colorblind"])
def test_an_exported_frame_marks_the_pinned_positions(palette, tmp_path):
    from PIL import Image

    from visualizer.animation import AnimationOptions
    from visualizer.export import export_to_folder
    from visualizer.layout import grid_layout, paint
    from visualizer.palette import get_palette
    from visualizer.render_image import MARGIN, text_metrics
    from visualizer.states import frame_state

    pin = get_palette(palette).pin
    pinned, plain = inside_trace(pins=((2, 30),)), inside_trace(pins=())
    layout = grid_layout(1, 8)
    cells = paint(frame_state(pinned, -1), layout, pinned, get_palette(palette))
    assert [c.pinned for c in cells] == [p == 2 for p in range(8)]
    assert "pinned" in cells[2].tooltip and "pinned" not in cells[3].tooltip
    options = AnimationOptions(layout="grid", palette=palette, prompt=False)
    found = {}
    for name, trace in (("pinned", pinned), ("plain", plain)):
        (tmp_path / name).mkdir()
        gif = export_to_folder(trace, options, tmp_path / name, formats=("gif",)).paths["gif"]
        with Image.open(gif) as image:
            image.seek(image.n_frames - 1)
            found[name] = _pin_columns(image, pin)
    char_w, _ = text_metrics(options.font_size)
    left = round(MARGIN + layout.cell(0, 2).col * char_w)
    assert set(range(left, left + 3)) <= found["pinned"]  # the bar at the pinned cell's left edge
    assert not found["plain"]  # no pins: no bar, and no "pinned" entry in the legend
    assert not set(range(left - 3, left)) & found["pinned"] and left + 3 not in found["pinned"]  # a bar of 3 pixels


def test_the_cached_renderer_never_reuses_an_unpinned_row_for_a_pinned_one():
    """At the first step positions 2 to 7 are noise: with two cells a row, rows (2, 3) and (4, 5) look alike but
    for the pin at 4, so the renderer's cache (rows of one geometry share lines) must tell them apart."""
    from visualizer.layout import grid_layout
    from visualizer.palette import STANDARD
    from visualizer.render_cache import FrameRenderer
    from visualizer.render_image import render_frame_image
    from visualizer.states import frame_state

    trace = inside_trace(pins=((4, 31),))
    layout = grid_layout(1, 8, per_row=2, cell_chars=5)
    renderer = FrameRenderer(trace, layout, STANDARD)
    frame = frame_state(trace, 0)
    assert renderer.render(frame, ["x"]).tobytes() == render_frame_image(trace, frame, layout, STANDARD, caption="x").tobytes()
