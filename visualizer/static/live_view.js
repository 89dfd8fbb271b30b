// The live view in the browser: draws the canvas and the commit-order panel from the live log
// that visualizer/live_stream.py writes (one JSON line per frame, only what changed).
//
// Loaded by app.py as the `js_on_load` of a gr.HTML whose template never depends on its value:
// the code defines window.dvLiveView once, then mounts a view on the element, and `watch` calls it
// after each update.  The value is a list, [start line, end line, frame slots...]: during a run a
// ring of the newest frames (live_stream.LiveRing; Gradio sends only the slots that changed), for a
// saved run every frame (live_stream.replay_value).  Each update's unread slots are applied in
// order, or from a key frame after a gap; a view that fell a whole ring behind asks the server for
// every frame ("need_frames").  Drawing happens at most once per animation frame; an update's frames
// are played out until the next update arrives, which (like the run's end) jumps to the newest
// frame: a browser that falls behind skips stale frames instead of playing back a backlog (follow()).
//
// Cells are spans in a `white-space: pre` block, laid out once per layout (no reflow), and only
// the cells that differ from what is on screen are touched.  Token text is only ever set with
// textContent / title, never as markup.  Colours, glyphs and cell texts follow visualizer/layout.py
// `paint` (the Pillow and HTML renderers draw the same decisions).
(function () {
  "use strict";
  if (window.dvLiveView) return;

  const NOISE_GLYPH = "░", EMPTY_GLYPH = "∙", ELLIPSIS = "…";  // layout.NOISE_GLYPH, EMPTY_GLYPH
  const EMPTY = 0, NOISE = 1, NEW = 2, KEPT = 3, REMASKED = 4, COMMITTED = 5;
  const CHANGED_FLAG = 1, THOUGHT_FLAG = 2;  // a cell's flags (live_stream.cell_flags)
  const ASK_DELAY_MS = 250;  // the server is asked for a step's "why" views once the slider rests this long
  const MAX_PACE_MS = 250;  // an update's frames are played out over at most this long (see follow())
  const LIVE_LAYERS_MS = 1000;  // a live run's layer panel is asked for at most this often while its block denoises
  const PLAY_FRAME_MS = 125;  // Play shows a frame this long at 1x (8 frames a second); the speed choice divides it
  const SPEEDS = [0.5, 1, 2, 4];
  const FONT_STACK = "'DejaVu Sans Mono', Menlo, Consolas, 'Liberation Mono', monospace";
  const TAU_COLOR = "#7c3aed", CONTROL_COLOR = "#9ca3af", CURSOR_COLOR = "#f59e0b";
  const NARROW_FRAME_PX = 780;  // a frame this narrow (inside its padding) gets the narrow text layout, as HEAD's @container rule the 8-cell grid
  const COMMIT_COLOR = "#16a34a", REMASK_COLOR = "#9ca3af", MARK_COLOR = "#ef4444";
  const VIRIDIS = [[68, 1, 84], [71, 44, 122], [59, 81, 139], [44, 113, 142], [33, 144, 141],
    [39, 173, 129], [92, 200, 99], [170, 220, 50], [253, 231, 37]];
  const ENTROPY_FLOOR = 1e-3, KL_FLOOR = 1e-4;  // the heatmap's log scales start here (layer_charts.KL_FLOOR_NATS)
  const PIN_BAR_PX = 3;  // palette.PIN_BAR_PX: the bar left of a pinned cell
  const SVG = "http://www.w3.org/2000/svg";

  function el(tag, style, text) {
    const node = document.createElement(tag);
    if (style) node.style.cssText = style;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function svgEl(tag, attrs) {
    const node = document.createElementNS(SVG, tag);
    for (const key in attrs) node.setAttribute(key, attrs[key]);
    return node;
  }

  function number(value) {  // numbers.number: three significant digits, never an exponent, "< 0.001" near zero
    if (!Number.isFinite(value)) return "n/a";
    if (value === 0) return "0";
    if (Math.abs(value) < 0.001) return value > 0 ? "< 0.001" : "> -0.001";
    if (Math.abs(value) >= 999.5) return value.toFixed(0);
    return String(Number(value.toPrecision(3)));
  }

  function chars(text) { return Array.from(text); }  // code points, as Python counts them

  function fit(text, width) {  // layout._fit
    const c = chars(text);
    if (c.length > width) return width > 1 ? c.slice(0, width - 1).join("") + ELLIPSIS : ELLIPSIS;
    return text + " ".repeat(width - c.length);
  }

  function pyRepr(text) {  // what Python's repr shows for a token piece, near enough for a tooltip
    const body = text.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/\t/g, "\\t").replace(/\r/g, "\\r");
    return body.includes("'") && !body.includes('"') ? `"${body}"` : `'${body.replace(/'/g, "\\'")}'`;
  }

  function halfToFloat(h) {
    const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, f = h & 0x3ff;
    if (e === 0) return s * Math.pow(2, -14) * (f / 1024);
    if (e === 31) return f ? NaN : s * Infinity;
    return s * Math.pow(2, e - 15) * (1 + f / 1024);
  }

  function decodeEntropy(b64) {
    const bytes = atob(b64), out = new Float32Array(bytes.length / 2);
    for (let i = 0; i < out.length; i++) out[i] = halfToFloat(bytes.charCodeAt(2 * i) | (bytes.charCodeAt(2 * i + 1) << 8));
    return out;
  }

  function viridis(value, logMax, floor = ENTROPY_FLOOR) {
    const logMin = Math.log10(floor);
    const level = (Math.log10(Math.max(value, floor)) - logMin) / (logMax - logMin);
    const pos = Math.min(Math.max(level, 0), 1) * (VIRIDIS.length - 1);
    const low = Math.min(Math.floor(pos), VIRIDIS.length - 2), frac = pos - low;
    return VIRIDIS[low].map((v, k) => Math.round(v * (1 - frac) + VIRIDIS[low + 1][k] * frac));
  }

  class LiveView {
    constructor(root, palette) {
      this.root = root;
      this.paletteName = palette || "standard";
      this.includeThought = false;  // count the thinking channel's tokens in the commit-order panel
      this.layoutKind = "grid";
      this.layout = null;  // the layout drawn (setLayout)
      this.wantLayout = "grid";
      this.stats = { framesShown: 0, lastShownAt: 0, shownIndex: -1, linesRead: 0 };
      this.following = true;
      this.build();
      this.reset();
    }

    // ---- DOM skeleton --------------------------------------------------------------------
    build() {
      this.frameBox = el("div", `font-family:${FONT_STACK};font-size:12.5px;padding:12px;border-radius:8px;overflow:auto;max-height:72vh`);
      this.frameBox.className = "dv-frame";
      this.status = el("div", "margin-bottom:6px", "Press Generate to start.");
      this.status.className = "dv-status";
      this.legend = el("div", "display:flex;flex-wrap:wrap;gap:14px;margin:0 0 8px 0");
      this.legend.className = "dv-legend";
      this.pre = el("pre", "margin:0;line-height:1.45;font-family:inherit;white-space:pre;background:transparent;padding:0;border:none");
      this.pre.className = "dv-canvas";
      this.pre.addEventListener("mouseover", (event) => { this.tooltip(event.target); this.hoverToken(event.target); });
      this.pre.addEventListener("click", (event) => this.pickToken(event.target));
      this.pre.addEventListener("mouseleave", () => clearTimeout(this.hoverTimer));  // gone before it rested: no ask
      this.frameBox.append(this.status, this.legend, this.pre);
      // a phone turned sideways, a window resized: the text layout follows the frame's width (layoutFor)
      new ResizeObserver(() => { if (this.start && this.layoutKind === "text") this.setLayout("text"); }).observe(this.frameBox);

      const bar = el("div", "display:flex;flex-wrap:wrap;align-items:center;gap:8px 10px;margin:8px 0");  // wraps on a phone
      bar.className = "dv-replay-bar";
      this.slider = el("input", "flex:1 1 160px");
      // counted from 1, as its label, the status line and the captions count frames (issue 58)
      Object.assign(this.slider, { type: "range", min: 1, max: 1, step: 1, value: 1, disabled: true });
      this.slider.className = "dv-replay";
      this.slider.setAttribute("aria-label", "Replay: frame");
      this.slider.addEventListener("input", () => { this.pause(false); this.moveTo(Number(this.slider.value) - 1); });
      this.sliderLabel = el("span", "font-variant-numeric:tabular-nums;min-width:9em", "Replay: frame –");
      this.sliderLabel.className = "dv-replay-label";
      bar.append(el("span", "opacity:.7", "Replay"), ...this.buildPlayer(), this.slider, this.sliderLabel);

      const details = el("details", "margin-top:6px");
      details.open = true;
      details.append(el("summary", "cursor:pointer", "Commit order: tau_b, commits per step, entropy (hover for details)"));
      this.panel = el("div", "display:flex;flex-wrap:wrap;gap:12px 20px;align-items:flex-start;padding-top:6px");
      this.panel.className = "dv-commit-panel";
      this.readoutBox = el("div", "flex:1 1 300px;font-size:13px;line-height:1.35");
      this.readoutBox.className = "dv-readout";
      this.charts = el("div", "flex:1 1 420px");
      this.tauSvg = svgEl("svg", { viewBox: "0 0 480 200", role: "img", "aria-label": "tau_b over steps" });
      this.commitSvg = svgEl("svg", { viewBox: "0 0 480 170", role: "img", "aria-label": "commits per step" });
      for (const s of [this.tauSvg, this.commitSvg]) s.style.cssText = "width:100%;max-width:480px;height:auto;font-family:ui-sans-serif,system-ui,sans-serif";
      this.charts.append(this.tauSvg, this.commitSvg);
      const heat = el("div", "flex:1 1 100%");
      const heatHead = el("div", "display:flex;gap:10px;align-items:center;margin-bottom:4px");
      this.heatTitle = el("div", "font-size:11px");
      // the heatmap's layers: the entropy, and the step-to-step shift where the run recorded it
      this.heatPick = el("select", "font-size:11px;display:none;width:auto;height:auto;padding:1px 4px;margin:0;"
        + "border:1px solid currentColor;border-radius:4px;background:transparent;color:inherit;flex:none");
      this.heatPick.className = "dv-heat-layer";
      this.heatPick.setAttribute("aria-label", "Heatmap layer");
      for (const [value, text] of [["entropy", "entropy"], ["kl", "shift (KL from the step before)"], ["klf", "KL to the final step"]]) {
        const option = el("option", "", text);
        option.value = value;
        this.heatPick.append(option);
      }
      this.heatLayer = "entropy";
      this.heatPick.addEventListener("change", () => { this.heatLayer = this.heatPick.value; this.schedule(); });
      heatHead.append(this.heatPick, this.heatTitle);
      // pinned positions: a triangle above each pinned column, on a strip as wide as the map (svg.heatmap_key's marks)
      this.heatPins = el("canvas", "width:100%;max-width:780px;height:6px;display:none");
      this.heatPins.className = "dv-heat-pins";
      this.heat = el("canvas", "width:100%;max-width:780px;height:160px;image-rendering:pixelated;display:block");
      this.heat.className = "dv-heatmap";
      this.heat.addEventListener("mousemove", (event) => this.heatTooltip(event));
      this.heatAxes = el("div", "font-size:11px;opacity:.8;margin-top:2px");  // the axes' names, drawn with the map
      this.heatAxes.className = "dv-heat-axes";
      this.heatKey = el("div", "font-size:11px;opacity:.8;margin-top:2px;display:none");  // the pin marks' key
      this.heatKey.className = "dv-heat-key";
      this.heatKeyMark = el("span", "", "\u25BC");
      this.heatKey.append(this.heatKeyMark, " pinned position: the run held this token there (the Pins box)");
      heat.append(heatHead, this.heatPins, this.heat, this.heatAxes, this.heatKey);
      this.structure = el("div", "flex:1 1 100%;max-width:600px");
      this.structure.className = "dv-structure";
      this.panel.append(this.readoutBox, this.charts, heat, this.structure);
      details.append(this.panel);
      this.root.replaceChildren(this.frameBox, bar, details);
    }

    // Play/pause, step and speed for a finished run or a loaded trace: the view holds every frame, so playing asks
    // the server for nothing.  Real buttons (keyboard and screen readers), enabled only once the run has ended.
    buildPlayer() {
      const style = "font:inherit;font-size:12px;padding:2px 8px;border:1px solid currentColor;border-radius:4px;"
        + "background:transparent;color:inherit;cursor:pointer;flex:none;width:auto;white-space:nowrap";
      const button = (text, action) => {
        const b = el("button", style, text);
        b.type = "button";
        b.className = "dv-replay-button";
        b.addEventListener("click", action);
        return b;
      };
      this.backButton = button("Step back", () => this.stepBy(-1));
      this.playButton = button("Play", () => (this.playing ? this.pause() : this.play()));
      this.playButton.style.minWidth = "4.5em";  // "Play" and "Pause" take the same room: the bar does not shift
      this.forwardButton = button("Step forward", () => this.stepBy(1));
      this.speedPick = el("select", style + ";padding:2px 6px;height:auto;margin:0");
      this.speedPick.className = "dv-replay-speed";
      this.speedPick.setAttribute("aria-label", "Replay speed");
      for (const speed of SPEEDS) {
        const option = el("option", "", `${speed}x`);
        option.value = String(speed);
        this.speedPick.append(option);
      }
      this.speed = 1;
      this.speedPick.value = "1";
      this.speedPick.addEventListener("change", () => {
        if (this.playing) this.playing = { from: this.shownIndex(), at: performance.now() };  // on from the frame shown
        this.speed = Number(this.speedPick.value);
        this.schedule();
      });
      return [this.backButton, this.playButton, this.forwardButton, this.speedPick];
    }

    replayReady() { return !!(this.start && this.end && this.frames.length); }  // a live run still streaming: not yet

    shownIndex() { return Math.max(0, Math.min(this.target, this.frames.length - 1)); }

    updatePlayer() {
      const ready = this.replayReady();
      for (const control of [this.backButton, this.playButton, this.forwardButton, this.speedPick]) {
        control.disabled = !ready;
        control.style.opacity = ready ? "" : "0.45";  // greyed while a run streams (inline style: no :disabled rule)
        control.style.cursor = ready ? "pointer" : "default";
      }
      this.playButton.textContent = this.playing ? "Pause" : "Play";
    }

    play() {
      if (!this.replayReady()) return;
      let from = this.shownIndex();
      if (from >= this.frames.length - 1) from = 0;  // at the end: play the run again from its first frame
      this.following = false;
      this.pace = null;
      this.target = from;
      this.playing = { from, at: performance.now() };
      this.updatePlayer();
      this.schedule();
    }

    pause(ask = true) {
      if (!this.playing) return;
      this.playing = null;
      clearTimeout(this.playTimer);
      this.updatePlayer();
      if (ask) this.askLater();  // the frame it stopped on: its accept budget, as after moving the slider
    }

    stepBy(delta) {
      this.pause(false);
      this.moveTo(Math.max(0, Math.min(this.shownIndex() + delta, this.frames.length - 1)));
    }

    moveTo(index) {  // the slider moved or a step pressed: show that frame
      this.following = index >= this.frames.length - 1;  // back at the end: follow the run again
      this.pace = null;
      this.target = index;
      this.slider.value = index + 1;
      this.schedule();
      this.askLater();  // the step's accept budget (and the picked token's alternatives), once it rests
    }

    playTarget() {  // the frame due now while playing; stops at the last frame, else schedules the next
      const p = this.playing, last = this.frames.length - 1;
      const due = p.from + Math.floor((performance.now() - p.at) * this.speed / PLAY_FRAME_MS);
      this.target = Math.min(due, last);
      if (due >= last) {
        this.following = true;
        this.pause();
        return;
      }
      clearTimeout(this.playTimer);
      const next = p.at + (due + 1 - p.from) * PLAY_FRAME_MS / this.speed;
      this.playTimer = setTimeout(() => this.schedule(), Math.max(next - performance.now(), 0) + 1);
    }

    reset() {
      this.forgetAsks();  // asks still waiting for the slider or the pointer to rest were about the run now replaced
      this.playing = null;  // a new run or trace: whatever was playing stops
      clearTimeout(this.playTimer);
      this.startLine = null;
      this.askedAll = false;
      this.pinned = new Set();  // the first block's pinned positions (the start line says which)
      this.slotSeen = [];
      this.start = null;
      this.end = null;
      this.tokens = new Map();
      this.frames = [];  // per frame: snapshot of the canvas + the message
      this.cur = null;  // canvas state after the newest frame read
      this.shown = null;  // what the spans show now
      this.spans = [];
      this.target = -1;
      this.following = true;
      this.pace = null;  // the frames of the last update being played out (follow())
      this.lastFramesAt = 0;
      this.picked = -1;  // the cell clicked for its alternatives
      this.hasThought = false;
      if (this.structure) this.structure.replaceChildren();
      this.updatePlayer();
    }

    // ---- reading the log ------------------------------------------------------------------
    receive(value) {
      if (!Array.isArray(value) || !value.length) return;
      const began = performance.now();
      try { this.read(value); } finally {
        this.stats.receives = (this.stats.receives || 0) + 1;
        this.stats.receiveMs = (this.stats.receiveMs || 0) + performance.now() - began;
      }
    }

    // The value is [start line, end line, frame lines...]: the live run's ring of recent frames
    // (visualizer/live_stream.py LiveRing) or a saved run's every frame.  Read each slot not read
    // before; apply frames in order from the next one, or restart at a key frame after a gap.
    read(value) {
      if (!Array.isArray(value) || !value.length) return;
      let atFirst = false;  // a trace loaded from a file (`runComing(true)`) opens at its first frame
      if (value[0] !== this.startLine || (this.askedAll && value[1] && value.length > 2 && value[2])) {
        // a new run, or every frame of this one after we asked for them: read it from the start
        atFirst = this.replayComing && value[0] !== this.startLine;
        // a live run began (a replay comes whole, its end line set): the server sends its card (app.py live_run_card)
        if (value[0] !== this.startLine && !value[1] && this.trigger) this.trigger("run_started");
        if (value[0] !== this.startLine) this.replayComing = false;
        const runs = this.stats.runs, again = value[0] === this.startLine;
        this.reset();
        this.apply(JSON.parse(value[0]));
        if (again) this.stats.runs = runs;  // the same run read again (its every frame, asked for): not another run
        this.startLine = value[0];
        this.slotSeen = [];
      }
      const fresh = [];
      for (let k = 2; k < value.length; k++) {
        const line = value[k];
        if (!line || this.slotSeen[k] === line) continue;
        this.slotSeen[k] = line;
        fresh.push(JSON.parse(line));
      }
      fresh.sort((a, b) => a.i - b.i);
      for (const m of fresh) {
        if (m.i < this.frames.length && this.frames[m.i]) continue;
        if (m.i === this.frames.length || m.key) this.apply(m);
      }
      if (value[1] && !this.end) this.apply(JSON.parse(value[1]));
      if (this.end && !this.askedAll && this.trigger && this.missing()) {
        this.askedAll = true;  // fell too far behind during the run: ask the server for every frame
        this.trigger("need_frames");
      }
      if (atFirst && this.end && this.frames.length) {
        this.following = false;
        this.target = 0;
        this.slider.value = 1;
      }
      if (this.following) this.follow();
      this.updatePlayer();
      if (this.askWhenFrames && this.frames.length) { this.askWhenFrames = false; this.askLater(0); }
      this.schedule();
    }

    // Following a live run.  The server sends a few updates a second, each with the frames made
    // since the last (app.py LIVE_MIN_INTERVAL_S); rather than jump a few steps at a time, the view
    // plays an update's frames out over about the time between updates.  Only the newest update is
    // ever played out: a new one jumps to the newest frame of the one before at once, and a block's
    // commit or the end of the run to the newest frame, so a browser never plays back a backlog.
    follow() {
      const newest = this.frames.length - 1, now = performance.now();
      const before = this.pace ? this.pace.goal : this.target;
      if (newest === before && !this.end) return;  // nothing new: keep playing the last update out
      const gap = this.lastFramesAt ? now - this.lastFramesAt : 0;
      this.lastFramesAt = now;
      // A block's committed frame is shown at once: the run's last one is its final frame, which must
      // wait neither for the pacing nor for the end line (sent after the end-of-run figures are made).
      const commits = this.frames.slice(Math.max(before, 0) + 1, newest + 1).some((f) => f && f.m.kind === "commit");
      if (this.end || commits || before < 0 || newest - before < 2 || gap <= 0) {
        this.pace = null;
        this.target = newest;
        return;
      }
      this.pace = { from: before, goal: newest, at: now, span: Math.min(gap, MAX_PACE_MS) };
      this.target = before + 1;
    }

    paceTarget() {  // the frame of the update being played out that is due now; schedules the next
      const p = this.pace, n = p.goal - p.from;
      const due = Math.min(n, 1 + Math.floor((performance.now() - p.at) * n / p.span));
      this.target = p.from + due;
      if (due >= n) { this.pace = null; return; }
      clearTimeout(this.paceTimer);
      this.paceTimer = setTimeout(() => this.schedule(), p.at + due * p.span / n - performance.now() + 1);
    }

    missing() {
      if (this.frames.length < this.end.frames) return true;
      for (let i = 0; i < this.frames.length; i++) if (!this.frames[i]) return true;
      return false;
    }

    apply(m) {
      this.stats.linesRead++;
      if (m.type === "start") {
        this.reset();
        if (m.run !== this.epochRun) { this.epochRun = m.run; newEpoch(); }  // another run: answers about the last are stale
        this.start = m;
        this.stats = { framesShown: 0, lastShownAt: 0, shownIndex: -1, linesRead: 1, runs: (this.stats.runs || 0) + 1 };
        const n = m.blocks * m.canvas;
        this.cur = { states: new Uint8Array(n), tokens: new Int32Array(n).fill(-1), flags: new Uint8Array(n), argmax: new Int32Array(m.canvas) };
        const wanted = this.wantLayout;
        this.setLayout("grid", true);  // a run in progress is shown in the grid
        this.wantLayout = wanted;
        this.hasThought = !!m.thinking;
        this.pinned = new Set(m.pins || []);  // the first block's pinned positions
        this.heatPick.style.display = m.shift || m.to_final ? "" : "none";
        for (const option of this.heatPick.options) option.hidden = (option.value === "kl" && !m.shift) || (option.value === "klf" && !m.to_final);
        if (this.heatPick.selectedOptions[0]?.hidden) { this.heatLayer = "entropy"; this.heatPick.value = "entropy"; }
        this.buildLegend();
        this.buildReadout();
        this.showWaiting();
      } else if (m.type === "frame" && this.start) {
        if (m.tokens) for (const id in m.tokens) this.tokens.set(Number(id), m.tokens[id]);
        const c = m.cells, cur = this.cur;
        let thought = false;
        for (let k = 0; k < c.length; k += 4) {
          cur.states[c[k]] = c[k + 1]; cur.tokens[c[k]] = c[k + 2]; cur.flags[c[k]] = c[k + 3];
          if (c[k + 3] & THOUGHT_FLAG) thought = true;
        }
        if (thought && !this.hasThought) { this.hasThought = true; this.buildLegend(); }
        if (m.argmax) for (let k = 0; k < m.argmax.length; k += 2) cur.argmax[m.argmax[k]] = m.argmax[k + 1];
        this.frames[m.i] = {
          m, states: cur.states.slice(), tokens: cur.tokens.slice(), flags: cur.flags.slice(),
          argmax: m.kind === "step" ? cur.argmax.slice() : null, entropy: m.entropy ? decodeEntropy(m.entropy) : null,
          kl: m.kl ? decodeEntropy(m.kl) : null, klf: m.klf ? decodeEntropy(m.klf) : null,
        };
        delete m.cells; delete m.argmax; delete m.entropy; delete m.kl; delete m.klf; delete m.tokens;  // kept decoded above
        this.slider.max = Math.max(this.frames.length, 1);
        this.slider.disabled = false;
        if (m.kind === "commit" && this.start.layers && !this.end) this.askLater();  // a live run's layer panel, once a block
        if (m.kind === "step" && this.start.layers && !this.end) this.askLayersLive(m.block);
      } else if (m.type === "end") {
        this.end = m;
        if (this.wantLayout === "text") this.setLayout("text");
        this.showStructure();
        this.askLater(0);  // the accept budget of the step on screen, now that the run is over
      }
    }

    schedule() {
      if (this.pending) return;
      this.pending = true;
      requestAnimationFrame(() => { this.pending = false; this.draw(); });
    }

    // ---- drawing --------------------------------------------------------------------------
    // A new run's start line, before its first frame (the model's first step can take seconds): `draw` has no
    // frame to show yet, so nothing of the run before may stay on screen, its status, replay label or charts.
    showWaiting() {
      this.status.textContent = "Waiting for the first step\u2026";
      this.slider.max = 1; this.slider.value = 1; this.slider.disabled = true;
      this.sliderLabel.textContent = "Replay: frame \u2013";
      this.updatePlayer();
      this.tauSvg.replaceChildren(); this.commitSvg.replaceChildren();
      this.heat.getContext("2d").clearRect(0, 0, this.heat.width, this.heat.height);
      this.heat.title = "";
      this.heatAxes.textContent = "";
      this.heatPins.style.display = this.heatKey.style.display = "none";
    }

    draw() {
      if (!this.start || !this.frames.length) return;
      const began = performance.now();
      try { this.drawFrame(); } finally { this.stats.drawMs = (this.stats.drawMs || 0) + performance.now() - began; }
    }

    drawFrame() {
      if (this.playing) this.playTarget();
      else if (this.pace && this.following) this.paceTarget();
      let index = Math.max(0, Math.min(this.target, this.frames.length - 1));
      while (index > 0 && !this.frames[index]) index--;  // a frame skipped after a long stall: the one before
      const frame = this.frames[index];
      if (!frame) return;
      this.showCells(frame);
      const m = frame.m;
      let status = `Frame ${index + 1}/${this.frames.length} · ${m.caption}`;
      if (m.kind === "step") status += ` · this step took ${Math.round(m.ms)} ms`;
      // a stopped run's last frame says it stopped, not the budget it had left (issue 58)
      if (this.end && this.end.stopped && index === this.frames.length - 1) status = `Frame ${index + 1}/${this.frames.length} · ${this.end.stopped}`;
      this.status.textContent = status;
      if (this.end && this.end.error) this.status.textContent += ` · ${this.end.error}`;
      if (this.following || this.playing) this.slider.value = index + 1;
      this.sliderLabel.textContent = `Replay: frame ${index + 1}/${this.frames.length}`;
      this.drawPanel(index);
      this.stats.framesShown++;
      this.stats.shownIndex = index;
      this.stats.shownFrames = this.frames.length;
      this.stats.lastShownAt = Date.now();
      this.stats.ended = !!this.end;
    }

    showCells(frame) {
      const shown = this.shown, all = !shown.valid;
      this.currentFrame = frame;
      for (let i = 0; i < this.spans.length; i++) {
        if (!this.spans[i]) continue;
        if (all || shown.states[i] !== frame.states[i] || shown.tokens[i] !== frame.tokens[i] || shown.flags[i] !== frame.flags[i]) {
          this.paintCell(i, frame.states[i], frame.tokens[i], frame.flags[i]);
          shown.states[i] = frame.states[i]; shown.tokens[i] = frame.tokens[i]; shown.flags[i] = frame.flags[i];
        }
      }
      shown.valid = true;
    }

    paintCell(i, state, token, flags) {  // layout.paint, one cell
      const span = this.spans[i], width = this.widths[i], pal = this.palette();
      let [fg, bg] = pal.states[state], text;
      if (state === NOISE || state === REMASKED) text = NOISE_GLYPH.repeat(width);
      else if (state === EMPTY) text = this.layoutKind === "grid" ? fit(EMPTY_GLYPH, width) : " ".repeat(width);
      else {
        const entry = this.tokens.get(token) || { p: `<${token}>` };
        const shown = this.layoutKind === "text" ? (entry.x ?? entry.g ?? entry.p) : (entry.g ?? entry.p);
        text = fit(shown, width);
        if (entry.s && state === COMMITTED) fg = pal.special;
        else if (flags & THOUGHT_FLAG && state === COMMITTED) fg = pal.thought[0];  // thinking channel: tinted text
      }
      const shadows = [];
      if (state === REMASKED) shadows.push(`inset 0 3px 0 0 ${pal.mark}`);
      if (flags & CHANGED_FLAG) shadows.push(`inset 0 -2px 0 0 ${pal.mark}`);
      if (flags & THOUGHT_FLAG) shadows.push(`inset 0 -${this.start.thought_band}px 0 0 ${pal.thought[1]}`);  // under the resampled mark
      if (i < this.start.canvas && this.pinned.has(i)) shadows.push(`inset ${PIN_BAR_PX}px 0 0 0 ${pal.pin}`);  // a pinned position
      span.textContent = text;
      span.className = `dv-cell dv-${this.start.states[state]}`;
      span.style.color = fg;
      span.style.background = bg;
      span.style.boxShadow = shadows.join(",");
      span.removeAttribute("title");  // rebuilt on hover, for the frame then on screen
    }

    palette() { return this.start.palettes[this.paletteName] || this.start.palettes.standard; }

    // The panel values of a frame as measured now: the answer's, or with the thought tokens
    // counted where the frame carries those too (visualizer/live_stream.py `_panel`).
    panelOf(m) { return this.includeThought && m.with_thoughts ? m.with_thoughts : m; }

    showStructure() {
      // the finished run's structure-first figure: SVG made by the server (visualizer.insight_charts),
      // every text in it escaped there
      const m = this.end;
      if (!m || !m.structure_svg) return;
      this.structure.innerHTML = this.includeThought && m.structure_svg_with_thoughts ? m.structure_svg_with_thoughts : m.structure_svg;
    }

    setIncludeThought(flag) {
      this.includeThought = !!flag;
      this.showStructure();
      this.schedule();  // the panel is redrawn with the frame
    }

    setPalette(name) {
      this.paletteName = name;
      if (!this.start) return;
      this.buildLegend();
      if (this.shown) this.shown.valid = false;
      this.schedule();
    }

    setLayout(kind, force) {
      if (!this.start) { this.wantLayout = kind; return; }
      const layout = this.layoutFor(kind);
      this.wantLayout = kind;
      if (!force && layout === this.layout) return;
      this.layout = layout;
      this.layoutKind = layout.kind;
      this.buildCanvas(layout);
      this.schedule();
    }

    // The text layout in a frame too narrow for its 96 columns (a phone, as webapp/app.py's HEAD asks of the grid)
    // is the same text laid out at fewer columns by the server (layout.NARROW_TEXT_COLUMNS): lines the browser
    // wrapped again would break mid-line and scatter the indentation.
    layoutFor(kind) {
      if (kind !== "text" || !this.end || !this.end.text_layout) return this.start.layout;
      const style = getComputedStyle(this.frameBox);
      const inner = this.frameBox.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
      return this.end.text_layout_narrow && inner <= NARROW_FRAME_PX ? this.end.text_layout_narrow : this.end.text_layout;
    }

    buildCanvas(layout) {
      const pal = this.palette(), cells = layout.cells, n = cells.length / 3;
      const byRow = new Map(), headers = new Map(layout.headers.map(([b, row]) => [row, b]));
      this.widths = new Int32Array(n);
      for (let i = 0; i < n; i++) {
        const row = cells[3 * i], col = cells[3 * i + 1], width = cells[3 * i + 2];
        this.widths[i] = width;
        if (!byRow.has(row)) byRow.set(row, []);
        byRow.get(row).push([col, width, i]);
      }
      this.spans = new Array(n);
      const nodes = [];
      for (let row = 0; row < layout.rows; row++) {
        if (row > 0) nodes.push(document.createTextNode("\n"));
        if (headers.has(row)) {
          const label = ("── block " + (headers.get(row) + 1) + " ").padEnd(layout.columns, "─");
          const rule = el("span", "", label);
          rule.className = "dv-rule";
          nodes.push(rule);
          continue;
        }
        let col = 0;
        for (const [c, width, i] of (byRow.get(row) || []).sort((a, b) => a[0] - b[0])) {
          if (c > col) nodes.push(document.createTextNode(" ".repeat(c - col)));
          const span = el("span");
          span.dataset.i = i;
          this.spans[i] = span;
          nodes.push(span);
          col = c + width;
        }
      }
      this.pre.replaceChildren(...nodes);
      this.pre.dataset.layout = layout.kind;  // a narrow frame lays the grid out 8 cells a row (webapp/app.py's CSS)
      this.frameBox.style.background = pal.background;
      this.frameBox.style.color = pal.foreground;
      for (const rule of this.pre.querySelectorAll(".dv-rule")) rule.style.color = pal.rule;
      this.shown = { states: new Uint8Array(n), tokens: new Int32Array(n), flags: new Uint8Array(n), valid: false };
    }

    buildLegend() {
      const pal = this.palette(), items = [];
      this.frameBox.style.background = pal.background;
      this.frameBox.style.color = pal.foreground;
      this.status.style.color = pal.muted;
      for (const rule of this.pre.querySelectorAll(".dv-rule")) rule.style.color = pal.rule;
      const item = (fg, bg, glyph, label, shadow) => {
        const outer = el("span", `color:${pal.foreground}`);
        outer.className = "dv-legend-item";
        const swatch = el("span", `color:${fg};background:${bg};padding:0 4px${shadow ? ";box-shadow:" + shadow : ""}`, glyph);
        outer.append(swatch, document.createTextNode(" " + label));
        items.push(outer);
      };
      for (const [state, label] of this.start.legend) {
        const [fg, bg] = pal.states[state];
        const noise = label === "noise" || label === "remasked";
        item(fg, bg, noise ? "░░" : "ab", label, label === "remasked" ? `inset 0 3px 0 0 ${pal.mark}` : "");
      }
      const [kfg, kbg] = pal.states[KEPT];
      item(kfg, kbg, "ab", this.start.resampled_label, `inset 0 -2px 0 0 ${pal.mark}`);
      item(pal.special, "transparent", this.start.pad_glyph, this.start.pad_label);
      if (this.hasThought) item(pal.thought[0], "transparent", "ab", this.start.thought_label, `inset 0 -${this.start.thought_band}px 0 0 ${pal.thought[1]}`);
      if (this.pinned.size) item(pal.states[COMMITTED][0], "transparent", "ab", "pinned", `inset ${PIN_BAR_PX}px 0 0 0 ${pal.pin}`);
      this.legend.replaceChildren(...items);
    }

    // ---- tooltips (built on hover, from the frame on screen) --------------------------------
    tooltip(target) {
      if (!target || !target.dataset || target.dataset.i === undefined || !this.currentFrame) return;
      const i = Number(target.dataset.i), f = this.currentFrame, canvas = this.start.canvas;
      const block = Math.floor(i / canvas), position = i % canvas;
      const state = f.states[i], token = f.tokens[i];
      const label = { 0: "not reached", 1: "noise", 2: "new", 3: "kept draft", 4: "remasked", 5: "committed" }[state];
      const parts = [`block ${block + 1} · position ${position} · ${label}`];
      if (token >= 0) parts.push(`token ${token} ${pyRepr(this.piece(token))}`);
      if (f.m.kind === "step" && block === f.m.block) {
        parts.push(`entropy ${number(f.entropy[position])} nats`);
        if (state === NOISE || state === REMASKED) parts.push(`argmax draft ${pyRepr(this.piece(f.argmax[position]))}`);
        if (f.flags[i] & CHANGED_FLAG) parts.push("resampled to a different token this step");
      }
      if (f.flags[i] & THOUGHT_FLAG) parts.push("thinking channel (not the answer)");
      if (i < canvas && this.pinned.has(i)) parts.push("pinned: the run held this token here (not the model's choice)");
      let text = parts.slice(0, 2).join(" · ") + (parts.length > 2 ? "\n" + parts.slice(2).join(" · ") : "");
      const story = this.commitStory(block, position, f.m.i);
      if (story) text += "\n" + story;
      target.title = text + "\nclick: the alternatives the model weighed here";
    }

    // ---- the "why" views, answered by the server (app.py) -----------------------------------
    // A token's alternatives: the cell's block at the frame on screen, or, for a block finished
    // before it, that block's last frame so far.  A block not reached yet has nothing to show.
    inspectFrame(i) {
      const block = Math.floor(i / this.start.canvas), shown = this.stats.shownIndex;
      for (let j = shown; j >= 0; j--) if (this.frames[j] && this.frames[j].m.block === block) return j;
      return -1;
    }

    askToken(i, picked = false) {  // picked: clicked (its position goes to "Pin text here"), not hovered
      const frame = this.inspectFrame(i);
      if (frame < 0 || !this.trigger) return;
      const canvas = this.start.canvas;
      this.trigger("inspect", { frame, position: i % canvas, block: Math.floor(i / canvas), picked, run: this.start.run, epoch: askEpoch });
    }

    pickToken(target) {
      clearTimeout(this.hoverTimer);  // the pointer that rested here to click is not a hover ask as well
      if (!target || !target.dataset || target.dataset.i === undefined || !this.start) return;
      const i = Number(target.dataset.i);
      if (this.spans[this.picked]) this.spans[this.picked].style.outline = "";
      if (i === this.picked) { this.picked = -1; return; }  // clicked again: unpicked, hovering answers again
      this.picked = i;
      target.style.outline = `2px solid ${CURSOR_COLOR}`;
      this.askToken(i, true);
    }

    // A new run or trace is on its way (Generate pressed, a file chosen: `runComing`) or has begun (`reset`): the
    // why-views are back to their hints, so nothing more is asked about the run on screen.  An ask already on its
    // way is answered with the hint once the server holds the new run (its run token, webapp.app._event_view).
    forgetAsks() {
      clearTimeout(this.askTimer);
      clearTimeout(this.hoverTimer);
      this.askWhenFrames = false;
    }

    hoverToken(target) {  // a token the pointer rests on, while none is picked
      clearTimeout(this.hoverTimer);
      if (this.picked >= 0 || !target || !target.dataset || target.dataset.i === undefined || !this.start) return;
      const i = Number(target.dataset.i);
      this.hoverTimer = setTimeout(() => this.askToken(i), 2 * ASK_DELAY_MS);
    }

    // The step on screen's accept budget (and the picked token at that step): asked once the
    // slider rests, and when a run ends; never for every live step.
    askLater(delay = ASK_DELAY_MS) {
      clearTimeout(this.askTimer);
      this.askTimer = setTimeout(() => {
        if (!this.trigger || !this.start) return;
        // the run ended before any of its frames reached us (a slow browser): ask once they arrive
        if (!this.frames.length) { this.askWhenFrames = true; return; }
        const frame = Math.max(0, Math.min(this.target, this.frames.length - 1));
        this.trigger("budget", { frame, run: this.start.run, epoch: askEpoch });
        if (this.start.layers) this.trigger("layers", { frame, run: this.start.run, epoch: askEpoch });  // the block's per-layer RMS (its panel, hidden until then)
        if (this.picked >= 0) this.askToken(this.picked);
      }, delay);
    }

    // A live run's layer panel while the block on screen denoises: each answer is that block's RMS so far (a few
    // KB of PNG), so it is asked at most once a LIVE_LAYERS_MS, never for every step; a block already committed
    // (the user went back to it) does not change, and its panel came with its commit.
    askLayersLive(block) {
      const now = performance.now();
      if (!this.trigger || now - (this.layersAskedAt || 0) < LIVE_LAYERS_MS) return;
      const frame = Math.max(0, Math.min(this.target, this.frames.length - 1));
      if (!this.frames[frame] || this.frames[frame].m.block !== block) return;
      this.layersAskedAt = now;
      this.stats.layersAskedLive = (this.stats.layersAskedLive || 0) + 1;
      this.trigger("layers", { frame, run: this.start.run, epoch: askEpoch });
    }

    piece(token) { const e = this.tokens.get(token); return e ? e.p : `<${token}>`; }

    blockFrames(block, upTo) {
      const out = [];
      for (let j = 0; j <= upTo && j < this.frames.length; j++) if (this.frames[j] && this.frames[j].m.block === block) out.push(this.frames[j]);
      return out;
    }

    commitStory(block, position, upTo) {  // charts.commit_story, from the frames read so far
      const frames = this.blockFrames(block, upTo).filter((f) => f.m.kind === "step");
      if (!frames.length) return "";
      const i = block * this.start.canvas + position;
      let first = -1;
      const remasks = [];
      frames.forEach((f, t) => {
        const s = f.states[i];
        if (first < 0 && (s === NEW || s === KEPT)) first = t;
        if (s === REMASKED) remasks.push(t + 1);
      });
      const commit = first >= 0 ? `commit step ${first + 1} (${number(frames[first].entropy[position])} nats)` : "not accepted yet";
      return `${commit} · ${remasks.length ? "re-masked at step " + remasks.join(", ") : "never re-masked"}`;
    }

    // ---- the commit-order panel -------------------------------------------------------------
    buildReadout() {
      const r = this.start.readout;
      this.readoutBox.replaceChildren();
      this.rWhere = el("div", "opacity:.7");
      const head = el("div", "margin:4px 0 6px 0");
      this.rTau = el("span", `font-size:26px;font-weight:600;color:${TAU_COLOR}`);
      this.rTau.title = r.tau_tip;
      this.rControl = el("span", `margin-left:14px;font-size:16px;color:${CONTROL_COLOR}`);
      this.rControl.title = r.control_tip;
      this.rReason = el("div", "font-size:12px;opacity:.85;margin-top:2px");  // readout.readout_sentence, filled here
      head.append(this.rTau, this.rControl, this.rReason);
      const table = el("table", "border-collapse:collapse;border:none;color:inherit;font-size:inherit;width:auto");
      this.rValues = r.names.map((name, k) => {
        const tr = el("tr", "border:none");
        tr.title = r.tips[k];
        const value = el("td", "font-variant-numeric:tabular-nums;padding:1px 0;border:none");
        tr.append(el("td", "opacity:.7;padding:1px 10px 1px 0;border:none", name), value);
        table.append(tr);
        return value;
      });
      this.readoutBox.append(this.rWhere, head, table);
    }

    readoutSentence(r) {  // readout.readout_sentence from the frame's numbers and the templates sent once
      const [tau, undefinedTau, control] = this.start.readout.sentence;
      const fill = (template, values) => template.replace(/\{(\w+)\}/g, (_, key) => values[key]);
      const head = r.order ? fill(tau, { tau: r.tau, order: r.order }) : fill(undefinedTau, { reason: r.reason });
      return head + (r.control === "undefined" ? "" : fill(control, { control: r.control }));
    }

    drawPanel(index) {
      const m = this.frames[index].m, r = this.panelOf(m).readout;
      this.rWhere.textContent = `${r.where} · ${r.status}`;
      this.rTau.textContent = `tau_b ${r.tau}`;
      this.rControl.textContent = `control ${r.control}`;
      this.rReason.textContent = this.readoutSentence(r);
      r.values.forEach((v, k) => { this.rValues[k].textContent = v; });
      const frames = this.blockFrames(m.block, index);
      const steps = frames.filter((f) => f.m.kind === "step");
      const points = steps.map((f) => this.panelOf(f.m).point);
      const committed = frames.find((f) => f.m.kind === "commit");
      if (committed && points.length) points[points.length - 1] = this.panelOf(committed.m).point;  // final values
      const cursor = m.kind === "step" ? steps.length - 1 : null;
      this.drawTau(m.block, points, cursor);
      this.drawCommits(m.block, points, cursor, committed ? this.panelOf(committed.m) : null);
      this.drawHeatmap(m.block, steps, cursor);
    }

    chartFrame(svg, width, height, title, left, right, top, bottom) {
      svg.replaceChildren();
      const plot = { x0: left, y0: top, x1: width - right, y1: height - bottom };
      plot.w = plot.x1 - plot.x0; plot.h = plot.y1 - plot.y0;
      this.label(svg, plot.x0, 13, title, { size: 11 });
      return plot;
    }

    label(svg, x, y, text, { anchor = "start", size = 10, fill = "currentColor" } = {}) {
      const node = svgEl("text", { x: x.toFixed(1), y: y.toFixed(1), "font-size": size, "text-anchor": anchor, fill });
      node.textContent = text;
      svg.append(node);
    }

    stepAxis(svg, plot, n, x) {
      const every = Math.max(1, Math.ceil(n / 8));
      for (let t = 0; t < n; t += every) this.label(svg, x(t), plot.y1 + 14, String(t + 1), { anchor: "middle", size: 9 });
      this.label(svg, plot.x1 + 4, plot.y1 + 14, "step", { size: 9 });
    }

    cursorLine(svg, plot, x, step) {
      if (step === null || step < 0) return;
      svg.append(svgEl("line", { x1: x(step), x2: x(step), y1: plot.y0, y2: plot.y1, stroke: CURSOR_COLOR, "stroke-width": 1.5 }));
    }

    // The three charts are drawn in Python too (visualizer/charts.py, for the show_frame API);
    // tests/test_browser_charts.py checks that both draw the same marks at the same places.
    drawTau(block, points, cursor) {  // charts.tau_over_steps_svg
      const svg = this.tauSvg, n = Math.max(this.start.budget, points.length, 1);
      const plot = this.chartFrame(svg, 480, 200, `Block ${block + 1}: tau_b after each step`, 36, 92, 22, 24);
      const x = (t) => plot.x0 + (t + 0.5) * plot.w / n, y = (v) => plot.y0 + (1 - v) / 2 * plot.h;
      for (const v of [-1, -0.5, 0, 0.5, 1]) {
        svg.append(svgEl("line", { x1: plot.x0, x2: plot.x1, y1: y(v), y2: y(v), stroke: "currentColor", "stroke-opacity": v === 0 ? 0.35 : 0.12 }));
        this.label(svg, plot.x0 - 4, y(v) + 4, String(v), { anchor: "end" });
      }
      this.stepAxis(svg, plot, n, x);
      const line = (values, color, dash) => {
        let run = [];
        const flush = () => {
          if (run.length === 1) run = [[run[0][0] - 3, run[0][1]], [run[0][0] + 3, run[0][1]]];
          if (run.length) svg.append(svgEl("polyline", { points: run.map((p) => p.join(",")).join(" "), fill: "none", stroke: color, "stroke-width": 1.8, ...(dash ? { "stroke-dasharray": dash } : {}) }));
          run = [];
        };
        values.forEach((v, t) => { if (v === null) flush(); else run.push([x(t).toFixed(1), y(v).toFixed(1)]); });
        flush();
      };
      line(points.map((p) => p[1]), CONTROL_COLOR, "4 3");
      line(points.map((p) => p[0]), TAU_COLOR);
      points.forEach((p, t) => { if (p[0] !== null) svg.append(svgEl("circle", { cx: x(t).toFixed(1), cy: y(p[0]).toFixed(1), r: 2.2, fill: TAU_COLOR })); });
      this.cursorLine(svg, plot, x, cursor);
      points.forEach((p, t) => {
        const hover = svgEl("rect", { x: x(t) - plot.w / n / 2, y: plot.y0, width: plot.w / n, height: plot.h, fill: "#000", "fill-opacity": 0 });
        const title = svgEl("title", {});
        title.textContent = `step ${t + 1}: tau_b ${p[0] === null ? "undefined" : p[0].toFixed(3)} · control ${p[1] === null ? "undefined" : p[1].toFixed(3)} · ${p[2]} of ${p[3]} measured positions committed`;
        hover.append(title);
        svg.append(hover);
      });
      if (points.length) {
        const last = points[points.length - 1];
        this.label(svg, plot.x1 + 6, y(last[0] ?? 0) + 4, `tau_b ${last[0] === null ? "undefined" : last[0].toFixed(3)}`, { fill: TAU_COLOR });
        if (last[1] !== null) this.label(svg, plot.x1 + 6, y(last[1]) - 6, `control ${last[1].toFixed(3)}`, { fill: CONTROL_COLOR });
      } else this.label(svg, plot.x0 + plot.w / 2, plot.y0 + plot.h / 2, "block not started", { anchor: "middle" });
    }

    drawCommits(block, points, cursor, commit) {  // charts.commits_per_step_svg
      const svg = this.commitSvg, n = Math.max(this.start.budget, points.length, 1) + 1;
      const plot = this.chartFrame(svg, 480, 170, `Block ${block + 1}: commits per step (first acceptance, ${this.hasThought && !this.includeThought ? "answer only" : "content only"})`, 36, 30, 22, 24);
      if (!points.length) { this.label(svg, plot.x0 + plot.w / 2, plot.y0 + plot.h / 2, "block not started", { anchor: "middle" }); return; }
      const up = points.map((p) => p[4]), down = points.map((p) => p[5]);
      const atFinal = commit ? commit.pending : 0;
      const top = Math.max(...up, atFinal, 1), bottom = Math.max(...down) > 0 ? Math.max(...down) : 0;
      const scale = plot.h / (top + bottom), zero = plot.y0 + top * scale, barW = plot.w / n;
      const x = (t) => plot.x0 + (t + 0.5) * barW;
      svg.append(svgEl("line", { x1: plot.x0, x2: plot.x1, y1: zero, y2: zero, stroke: "currentColor", "stroke-opacity": 0.5 }));
      this.label(svg, plot.x0 - 4, plot.y0 + 8, String(top), { anchor: "end", size: 9 });
      if (bottom) this.label(svg, plot.x0 - 4, plot.y1, `-${bottom}`, { anchor: "end", size: 9 });
      const bar = (t, y0, h, color, opacity) => svg.append(svgEl("rect", { x: (x(t) - barW * 0.4).toFixed(1), y: y0.toFixed(1), width: (barW * 0.8).toFixed(1), height: h.toFixed(1), fill: color, "fill-opacity": opacity ?? 1 }));
      points.forEach((_, t) => {
        if (up[t]) bar(t, zero - up[t] * scale, up[t] * scale, COMMIT_COLOR);
        if (down[t]) bar(t, zero, down[t] * scale, REMASK_COLOR);
        const hover = svgEl("rect", { x: x(t) - barW / 2, y: plot.y0, width: barW, height: plot.h, fill: "#000", "fill-opacity": 0 });
        const title = svgEl("title", {});
        title.textContent = `step ${t + 1}: ${up[t]} content position(s) first accepted, ${down[t]} re-mask event(s)`;
        hover.append(title);
        svg.append(hover);
      });
      if (commit) {
        if (atFinal) bar(n - 1, zero - atFinal * scale, atFinal * scale, "currentColor", 0.6);
        this.label(svg, x(n - 1), plot.y1 + 14, "F", { anchor: "middle", size: 9 });
      }
      this.stepAxis(svg, plot, n - 1, x);
      this.cursorLine(svg, plot, x, cursor);
    }

    drawHeatmap(block, steps, cursor) {  // charts.entropy_heatmap_svg, on a canvas
      const canvas = this.start.canvas, rows = Math.max(this.start.budget <= 128 ? this.start.budget : steps.length, steps.length, 1);
      const cw = 3, ch = Math.max(2, Math.floor(160 / rows));
      const layer = this.heatLayer, kl = layer !== "entropy";  // "kl": the shift; "klf": the KL to the final step
      this.heatTitle.textContent = layer === "klf"
        ? `Block ${block + 1}: KL of each position's final distribution from each step's, nats (outlined: first acceptance) · dark: already final, yellow: far from it`
        : kl
        ? `Block ${block + 1}: KL of each position's distribution from the previous step's, nats (outlined: first acceptance) · dark: settled, yellow: moving`
        : `Block ${block + 1}: entropy per position and step (outlined: first acceptance) · dark: confident, yellow: uncertain`;
      this.heatAxes.textContent = `across: position 0 to ${canvas - 1} → · down: step 1 to ${rows} ↓`
        + (cursor !== null ? " · orange line: the step on screen" : "");
      if (this.heat.width !== canvas * cw || this.heat.height !== rows * ch) { this.heat.width = canvas * cw; this.heat.height = rows * ch; }
      const ctx = this.heat.getContext("2d");
      ctx.clearRect(0, 0, this.heat.width, this.heat.height);
      const image = ctx.createImageData(canvas, rows);
      const base = block * canvas, first = new Int32Array(canvas).fill(-1);
      steps.forEach((f, t) => {
        const key = {entropy: "rgba", kl: "rgbaKl", klf: "rgbaKlf"}[layer];
        if (!f[key]) {  // a step's heatmap row never changes: coloured once per layer
          f[key] = new Uint8ClampedArray(4 * canvas);  // transparent where there is no value (a block's first step has no KL)
          const values = {entropy: f.entropy, kl: f.kl, klf: f.klf}[layer];
          for (let p = 0; values && p < canvas; p++) {
            const [r, g, b] = viridis(values[p], this.start.log_max, kl ? KL_FLOOR : ENTROPY_FLOOR);
            f[key].set([r, g, b, 255], 4 * p);
          }
        }
        image.data.set(f[key], 4 * t * canvas);
        for (let p = 0; p < canvas; p++) {
          const s = f.states[base + p];
          if (first[p] < 0 && (s === NEW || s === KEPT)) first[p] = t;
        }
      });
      // scale the one-pixel-per-cell image up without smoothing, then outline first acceptances
      const small = document.createElement("canvas");
      small.width = canvas; small.height = rows;
      small.getContext("2d").putImageData(image, 0, 0);
      ctx.imageSmoothingEnabled = false;
      ctx.drawImage(small, 0, 0, canvas * cw, rows * ch);
      ctx.strokeStyle = MARK_COLOR;
      ctx.lineWidth = 1;
      for (let p = 0; p < canvas; p++) if (first[p] >= 0) ctx.strokeRect(p * cw + 0.5, first[p] * ch + 0.5, cw - 1, ch - 1);
      if (cursor !== null) { ctx.fillStyle = CURSOR_COLOR; ctx.fillRect(0, (cursor + 1) * ch - 1, canvas * cw, 2); }
      this.drawHeatPins(block, canvas, cw);
      this.heatSteps = steps;
      this.heatGeometry = { cw, ch, rows };
    }

    drawHeatPins(block, canvas, cw) {  // pins hold only the first block, as in charts.entropy_heatmap_svg
      const pins = block === 0 ? [...this.pinned].filter((p) => p < canvas) : [];
      this.heatPins.style.display = this.heatKey.style.display = pins.length ? "" : "none";
      if (!pins.length) return;
      const color = this.palette().pin;
      this.heatKeyMark.style.color = color;
      if (this.heatPins.width !== canvas * cw) this.heatPins.width = canvas * cw;
      this.heatPins.height = 6;  // also clears it
      const ctx = this.heatPins.getContext("2d");
      ctx.fillStyle = color;
      for (const p of pins) {  // the SVG's "h6l-3 5z": a 6-wide triangle pointing down at the column's centre
        const x = (p + 0.5) * cw;
        ctx.beginPath(); ctx.moveTo(x - 3, 0); ctx.lineTo(x + 3, 0); ctx.lineTo(x, 5); ctx.closePath(); ctx.fill();
      }
      this.heatPins.title = `pinned: ${pins.sort((a, b) => a - b).join(", ")}`;
    }

    heatTooltip(event) {
      if (!this.heatSteps || !this.heatGeometry) return;
      const box = this.heat.getBoundingClientRect(), g = this.heatGeometry;
      const p = Math.floor((event.clientX - box.left) / box.width * this.start.canvas);
      const t = Math.floor((event.clientY - box.top) / box.height * g.rows);
      const f = this.heatSteps[t];
      if (!f || p < 0 || p >= this.start.canvas) { this.heat.title = ""; return; }
      const shift = f.kl ? `KL ${number(f.kl[p])} nats` : "no KL (no step before it)";
      this.heat.title = `step ${t + 1} · position ${p} · entropy ${number(f.entropy[p])} nats` + (this.start.shift ? ` · ${shift}` : "")
        + (f.klf ? ` · KL to final ${number(f.klf[p])} nats` : "");
    }
  }

  // Ask epochs: each ask for a why-view carries the epoch it was made in, and its answer comes back marked with it
  // (app.py `_asked_in`).  Pressing Generate (or choosing a file) and a new run's start line each begin a new
  // epoch, so an answer the server computed before the new run, and delivered after the click, is about the run
  // being replaced: a style rule hides it at once, and `dropStale` (run after each answer lands) puts the panel's
  // hint in its place.  The server's run check covers an answer computed after the new run began.
  let askEpoch = 0;
  const epochStyle = document.createElement("style");
  document.head.append(epochStyle);

  function newEpoch() {
    askEpoch += 1;
    epochStyle.textContent = `.dv-stale{display:none}.dv-asked:not([data-epoch="${askEpoch}"])>.dv-answer{display:none}`
      + `.dv-asked:not([data-epoch="${askEpoch}"])>.dv-stale{display:block}`;
    dropStale();
  }

  function dropStale() {
    for (const asked of document.querySelectorAll(".dv-asked")) {
      if (asked.dataset.epoch === String(askEpoch)) continue;
      const stale = asked.querySelector(":scope > .dv-stale");
      asked.replaceChildren(...(stale ? stale.childNodes : []));
      asked.removeAttribute("data-epoch");
      asked.classList.remove("dv-asked");
    }
  }

  newEpoch();

  const views = [];
  window.dvLiveView = {
    views,
    mount(element, props, watch, trigger) {
      const root = element.querySelector(".dv-live") || element;
      const view = new LiveView(root, props.palette);
      view.trigger = trigger;
      views.push(view);
      element.dvView = view;
      view.receive(props.value);
      watch("value", () => view.receive(props.value));
      return view;
    },
    // Generate pressed (replay false) or a trace file chosen (true): a loaded trace opens at its first frame
    runComing(replay = false) { newEpoch(); for (const v of views) if (v.root.isConnected) { v.forgetAsks(); v.replayComing = replay; } },
    dropStale,
    epoch: () => askEpoch,
    setPalette(name) { for (const v of views) if (v.root.isConnected) v.setPalette(name); },
    setIncludeThought(flag) { for (const v of views) if (v.root.isConnected) v.setIncludeThought(flag); },
    setLayout(kind) { for (const v of views) if (v.root.isConnected) v.setLayout(kind); },
    stats() { const v = views.find((x) => x.root.isConnected); return v ? { ...v.stats } : null; },
  };
})();
