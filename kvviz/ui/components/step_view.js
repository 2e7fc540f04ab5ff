// kvviz stepper: draws every event of a run in the browser (see kvviz/ui/components/step_view.py for the
// payload format). plotly_view.js comes before this file (loadPlotly, themeOf, themed,
// plotConfig). One instance per mounted component, kept on its parent element so that a
// re-invocation (new data after a rerun) reuses the DOM, the plots and the current step.

const KEYS = { ArrowLeft: "prev", ArrowRight: "next", Home: "reset", End: "end", m: "moment", M: "moment" };
// widgets that use these keys themselves keep them (the same rules as Streamlit's shortcuts)
const OWN = 'input, textarea, select, [contenteditable="true"], [role="slider"], [role="tab"], ' +
  '[role="tablist"], [role="listbox"], [role="option"], [role="combobox"], [role="radio"], ' +
  '[role="spinbutton"], [role="menu"], [role="menuitem"], [role="grid"], [data-testid="stDataFrame"], .kvs-tblwrap';
// Space activates these itself (a focused button, link or disclosure keeps its Space)
const OWN_SPACE = 'button, a[href], summary, [role="button"], [role="checkbox"], [role="switch"]';
const REGIONS = ["top", "lead", "main", "side", "wide", "more"];
const REPORT_MS = 250;          // the step goes to Python this long after the last press or tick
// the step goes into the address this long after the press's frame is painted: history.replaceState
// took 11-21 ms of a press on the long Gemma 3 view (docs/measured-gemma3.md); presses in a row (a
// key held, autoplay at 4 per second) write it once, and the report (REPORT_MS) writes it first
const URL_MS = 120;
const KEEP_MS = 4000;           // presenter mode: how long a fitted step is kept in view as the page grows
const KEEP_UNTIL = ["wheel", "touchstart", "pointerdown", "keydown"];     // ... or until the lecturer acts
const REST_KEY = "kvs_rest";    // step_view.REST_KEY: the placeholder of a page waiting for the first drawing
const SPEEDS = [0.5, 1, 2, 4];  // autoplay, events per second (their labels: frames.SPEEDS, in the language)

// Material icons (check, hourglass_empty) as inline SVG: no icon font needed
const ICONS = {
  did: '<svg viewBox="0 0 24 24" width="1.1em" height="1.1em" fill="currentColor"><path d="M9 16.17L4.83 12l-1.42 1.41L9 19 21 7l-1.41-1.41z"/></svg>',
  todo: '<svg viewBox="0 0 24 24" width="1.1em" height="1.1em" fill="currentColor"><path d="M6 2v6h.01L6 8.01 10 12l-4 4 .01.01H6V22h12v-5.99h-.01L18 16l-4-4 4-3.99-.01-.01H18V2H6zm10 14.5V20H8v-3.5l4-4 4 4zm-4-5l-4-4V4h8v3.5l-4 4z"/></svg>',
};

const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) =>
  ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);

// ---------------------------------------------------------------- keys: one listener per tab
const instances = new Set();
function active() {
  let found = null;
  for (const s of instances) {
    if (s.root.isConnected && s.root.offsetParent !== null) found = s;   // visible (not in a hidden tab)
  }
  return found;
}
function installKeys() {
  if (window.__kvsKeys) return;
  window.__kvsKeys = true;
  window.addEventListener("keydown", (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey || e.shiftKey || e.repeat && e.key === " ") return;
    let act = KEYS[e.key];
    const el = e.target;
    const closest = (sel) => el && el.closest && el.closest(sel);
    if (closest(OWN) || (el && el.isContentEditable)) return;
    if (!act && e.key === " ") {
      if (closest(OWN_SPACE)) return;
      act = "play";
    }
    if (!act) return;
    const s = active();
    if (!s) return;                        // a page without a stepper: leave the key alone
    e.preventDefault();
    e.stopImmediatePropagation();
    s.act(act);
  }, true);
}

// ---------------------------------------------------------------- small HTML builders
function chipsHTML(P, st) {
  const w = P.words;
  const chips = st.chips.map(([pos, tok, kind]) =>
    `<span role="listitem" class="kv-chip kvs-${kind}" title="${esc(w["chip_" + kind] || "")}">` +
    `<small>${esc(pos)}</small> ${esc(tok)}</span>`).join("");
  const legend = st.legend ? `<div class="kvs-legend">${["prompt", "processed", "pending"].map((k) =>
    `<span class="kvs-leg kvs-${k}">${esc(w["legend_" + k])}</span>`).join("")}</div>` : "";
  return `<div role="list" class="kvs-strip" aria-label="${esc(w.strip_label)}">${chips}</div>${legend}`;
}

function tableHTML(t, S) {
  const marks = new Map((t.marks || []).map(([r, c, cls]) => [r + ":" + c, cls]));
  const rowCls = new Map((t.row_marks || []).map(([r, cls]) => [r, cls]));
  const head = `<thead><tr>${t.cols.map((c) => `<th scope="col">${esc(c)}</th>`).join("")}</tr></thead>`;
  const body = t.rows.map((row, r) => `<tr${rowCls.has(r) ? ` class="kvs-${rowCls.get(r)}"` : ""}>` +
    row.map((cell, c) => {
      const cls = marks.get(r + ":" + c);
      const tag = c === 0 && t.row_head ? "th" : "td";
      return `<${tag}${tag === "th" ? ' scope="row"' : ""}${cls ? ` class="kvs-${cls}"` : ""}>${esc(cell)}</${tag}>`;
    }).join("") + "</tr>").join("");
  return `${t.title ? `<div class="kvs-ttl">${S(t.title)}</div>` : ""}` +
    `<div class="kvs-tblwrap"${scrollable(t.title)}><table class="kvs-tbl">${head}<tbody>${body}</tbody></table></div>`;
}

function blockHTML(P, b, S, present) {
  if (present ? b.x : b.p) return "";     // explanations leave presenter mode; "p" blocks exist only there
  if (b.fold !== undefined) {        // presenter mode: the button that shows or hides a pick grid
    return `<button type="button" class="kvs-btn kvs-fold" aria-expanded="${b.open ? "true" : "false"}">` +
      `<span aria-hidden="true">${b.open ? "▾" : "▸"}</span> ${esc(P.pick && P.pick.fold)}</button>`;
  }
  if (b.html !== undefined) return `<div class="kvs-md">${S(b.html)}</div>`;
  if (b.note !== undefined) return `<div class="kvs-note">${S(b.note)}</div>`;
  if (b.alert !== undefined) {
    const icon = { ok: "✓", bad: "✗", info: "ℹ", warn: "⚠" }[b.alert] || "";
    return `<div class="kvs-alert kvs-${b.alert}" role="note"><span aria-hidden="true">${icon}</span>` +
      `<div>${S(b.text)}</div></div>`;
  }
  if (b.lines !== undefined) {
    return b.lines.map(([kind, text]) => `<p class="kvs-line kvs-${kind}"><span class="kvs-ico" aria-hidden="true">` +
      `${ICONS[kind] || ""}</span><span>${S(text)}</span></p>`).join("");
  }
  if (b.strip !== undefined) {
    const strip = (b.strip.label ? `<div class="kvs-md">${S(b.strip.label)}</div>` : "") + chipsHTML(P, b.strip);
    // presenter mode: a strip's label beside its chips, also in columns of strips (step_view.css)
    return present ? `<div class="kvs-sline">${strip}</div>` : strip;
  }
  if (b.tbl !== undefined) return tableHTML(b.tbl, S);
  if (b.details !== undefined) {
    return `<details class="kvs-details"><summary>${esc(b.details)}</summary>` +
      b.body.map((x) => blockHTML(P, x, S, present)).join("") + "</details>";
  }
  if (b.cols !== undefined) {
    return `<div class="kvs-cols" style="--kvs-n:${b.cols.length}">` +
      b.cols.map((col) => `<div>${col.map((x) => blockHTML(P, x, S, present)).join("")}</div>`).join("") + "</div>";
  }
  return "";
}

// A table's scrolling box: focusable, so keyboard users can scroll it too, and named by its title.
function scrollable(title) {
  const name = String(title || "").replace(/<[^>]*>/g, "").trim();
  return ` tabindex="0" role="region"${name ? ` aria-label="${esc(name)}"` : ""}`;
}

function csvCell(x) {
  const s = String(x ?? "");
  return /[",\n]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
}

// ---------------------------------------------------------------- the stepper
class Stepper {
  constructor(parent) {
    this.parent = parent;
    this.root = document.createElement("div");
    this.root.className = "kvs-root";
    parent.appendChild(this.root);
    this.step = 0;
    this.reported = null;
    this.playing = null;
    this.speed = 1;
    this.drawn = -1;
    this.figCache = new Map();
    this.needs = new Map();         // presenter mode: figure:width -> the height its labels need
    this.pickOpen = false;          // presenter mode: the pick grid (model view) shown
    this.pickFocus = null;          // [row, col] to focus once the grid is drawn again (keyboard picks)
    instances.add(this);
    // Streamlit rewrites the address after some reruns: put our step back when a run ends
    const app = document.querySelector("[data-testid='stApp']");
    if (app) {
      this.observer = new MutationObserver(() => {
        if (app.getAttribute("data-test-script-state") === "notRunning") this.writeUrl();
      });
      this.observer.observe(app, { attributes: true, attributeFilter: ["data-test-script-state"] });
    }
    this.chartHeight = 300;
    this.scale = 1;                 // presenter mode: the step's text size (fit() shrinks it where the step is long)
    this.chips = 1;                 // presenter mode: the token strip's size, after the text (a long text's strip)
    // a click or key elsewhere (another widget, a tab) may rerun the page: send a pending step first
    this.onOutside = (e) => {
      if (this.reportTimer && !this.root.contains(e.target)) { clearTimeout(this.reportTimer); this.report(); }
    };
    document.addEventListener("pointerdown", this.onOutside, true);
    document.addEventListener("keydown", this.onOutside, true);
    this.onResize = () => {          // plots were drawn at the old width: draw again (debounced)
      clearTimeout(this.resizeTimer);
      this.resizeTimer = setTimeout(() => {
        this.presentRows = this.defaultRows();
        this.scale = 1;
        this.chips = 1;
        this.root.style.removeProperty("--kvs-scale");
        this.root.style.removeProperty("--kvs-chips");
        this.render(true);
      }, 150);
    };
    window.addEventListener("resize", this.onResize);
  }

  destroy() {
    this.stop();
    this.stopKeeping?.();
    clearTimeout(this.reportTimer);
    clearTimeout(this.restTimer);
    this.restWatch?.disconnect();
    this.cancelUrl();
    document.removeEventListener("pointerdown", this.onOutside, true);
    document.removeEventListener("keydown", this.onOutside, true);
    this.observer?.disconnect();
    window.removeEventListener("resize", this.onResize);
    instances.delete(this);
    clearTimeout(this.prefetchTimer);
    this.resetPlots();
    this.root.remove();
  }

  load(P, data, setStateValue, setTriggerValue) {
    const sameRun = this.P && this.runId === data.run;
    this.setStateValue = setStateValue;
    this.setTriggerValue = setTriggerValue;
    this.P = P;
    this.S = (x) => (typeof x === "number" ? P.texts[x] : x) ?? "";
    this.runId = data.run;
    this.path = location.pathname;
    this.present = !!data.present;
    this.fmt = data.fmt || "png";
    this.lecture = data.lecture || [];
    this.root.classList.toggle("kvs-present", this.present);
    const [a, b] = (this.present && P.present_ratio) || P.ratio || [3, 2];
    this.root.style.setProperty("--kvs-cols", `minmax(0, ${Number(a)}fr) minmax(0, ${Number(b)}fr)`);
    this.root.classList.toggle("kvs-stacked", !P.ratio);
    for (const [k, c] of Object.entries(P.colors || {})) this.root.style.setProperty("--kvs-" + k, c);
    if (!this.bar) this.build();
    this.updateWords();
    const last = P.frames.length - 1;
    // the same run (new language, layer, theme): keep the step shown; a new run starts where Python says
    this.step = Math.min(last, Math.max(0, sameRun ? this.step : (data.start | 0)));
    if (!sameRun) this.reported = data.start | 0;
    this.slider.max = String(last);
    this.plotly = loadPlotly(data.plotly).catch((e) => { this.plotlyError = String(e); return null; });
    this.drawn = -1;
    this.render(true);
    // presenter mode: the step in place at once, its charts drawn into it (not the page's title and
    // folded settings first, then a jump once the charts are drawn)
    if (this.present && !sameRun) this.scrollInPlace();
    this.writeUrl();
  }

  build() {
    const r = this.root;
    r.innerHTML = `
      <div class="kvs-top">
        <h3 class="kvs-heading" aria-live="polite"></h3>
        <div class="kvs-bar" role="group">
          <button type="button" class="kvs-btn" data-act="prev" aria-keyshortcuts="ArrowLeft"></button>
          <button type="button" class="kvs-btn kvs-primary" data-act="next" aria-keyshortcuts="ArrowRight"></button>
          <button type="button" class="kvs-btn" data-act="reset" aria-keyshortcuts="Home"></button>
          <button type="button" class="kvs-btn" data-act="end" aria-keyshortcuts="End"></button>
          <button type="button" class="kvs-btn" data-act="play" aria-keyshortcuts="Space" aria-pressed="false"></button>
          <label class="kvs-speed"><span></span><select>${SPEEDS.map((s) =>
            `<option value="${s}"${s === 1 ? " selected" : ""}>${s}</option>`).join("")}</select></label>
          <label class="kvs-slider"><span></span><span class="kvs-track"><input type="range" min="0" step="1" value="0">` +
          `<span class="kvs-marks" aria-hidden="true"></span></span></label>
          <button type="button" class="kvs-btn kvs-moment" data-act="moment" aria-keyshortcuts="M" hidden></button>
        </div>
      </div>
      <div class="kvs-lecture" hidden></div>
      <div class="kvs-notice" role="note" hidden></div>
      <div class="kvs-region" data-region="top"></div>
      <div class="kvs-grid">
        <div class="kvs-region kvs-lead" data-region="lead"></div>
        <div class="kvs-region kvs-main" data-region="main"></div>
        <div class="kvs-region kvs-side" data-region="side"></div>
      </div>
      <div class="kvs-region" data-region="wide"></div>
      <div class="kvs-metrics"></div>
      <div class="kvs-cache"></div>
      <div class="kvs-region kvs-more" data-region="more"></div>`;
    this.heading = r.querySelector(".kvs-heading");
    this.noticeEl = r.querySelector(".kvs-notice");
    this.lectureEl = r.querySelector(".kvs-lecture");
    this.marksEl = r.querySelector(".kvs-marks");
    this.noticeEl.addEventListener("click", (e) => {
      const b = e.target.closest("[data-jump]");
      if (b) this.go(Number(b.dataset.jump));
    });
    this.bar = r.querySelector(".kvs-bar");
    this.slider = r.querySelector(".kvs-slider input");
    this.speedSel = r.querySelector(".kvs-speed select");
    this.regions = {};
    for (const el of r.querySelectorAll("[data-region]")) this.regions[el.dataset.region] = el;
    this.metricsEl = r.querySelector(".kvs-metrics");
    this.cacheEl = r.querySelector(".kvs-cache");
    for (const b of this.bar.querySelectorAll("button")) {
      b.addEventListener("mousedown", (e) => e.preventDefault());   // a click keeps the focus where it was
      b.addEventListener("click", () => this.act(b.dataset.act));
    }
    this.slider.addEventListener("input", () => this.go(Number(this.slider.value)));
    this.speedSel.addEventListener("change", () => {
      this.speed = Number(this.speedSel.value) || 1;
      if (this.playing) { this.stop(); this.play(); }
    });
    this.cacheEl.addEventListener("click", (e) => { if (e.target.closest(".kvs-csv")) this.downloadCsv(); });
    r.addEventListener("click", (e) => {
      const fold = e.target.closest(".kvs-fold");
      if (!fold) return;
      this.pickOpen = !this.pickOpen;
      this.render(true);
      this.root.querySelector(".kvs-fold")?.focus();        // the same button, drawn again
    });
  }

  updateWords() {
    const w = this.P.words;
    const label = (act, text, key, icon) => {
      const b = this.bar.querySelector(`[data-act="${act}"]`);
      b.innerHTML = `<span aria-hidden="true">${icon}</span> ${esc(text)} <kbd>${esc(key)}</kbd>`;
      b.title = w[act + "_help"] || "";
    };
    label("prev", w.prev, w.key_left, "‹");
    label("next", w.next, w.key_right, "›");
    label("reset", w.reset, w.key_home, "⟲");
    label("end", w.end, w.key_end, "⇥");
    this.bar.setAttribute("aria-label", w.controls);
    this.bar.querySelector(".kvs-speed span").textContent = w.speed;
    this.speedSel.title = w.speed_help;
    this.speedSel.setAttribute("aria-label", w.speed);
    for (const o of this.speedSel.options) o.textContent = (w.speeds || {})[o.value] || o.value;
    this.bar.querySelector(".kvs-slider span").textContent = w.step;
    this.slider.setAttribute("aria-label", w.step);
    this.slider.title = w.step_help;
    this.playLabel();
    this.drawMarks();
  }

  // the run's key moments: ticks under the slider (their labels on hover) and the button (key M)
  // that jumps to the next one after the step shown (from the last one back to the first)
  drawMarks() {
    const M = this.P.moments || [];
    const last = Math.max(1, this.P.frames.length - 1);
    const w = this.P.words;
    this.marksEl.innerHTML = M.map(([i, label]) =>
      `<span class="kvs-mark" style="--kvs-at:${Math.min(1, i / last)}" title="${esc(label)}"></span>`).join("");
    const b = this.bar.querySelector('[data-act="moment"]');
    b.hidden = !M.length;
    b.innerHTML = `<span aria-hidden="true">»</span><span class="kvs-mtext"> ${esc(w.moment_next || "")}</span> ` +
      `<kbd>${esc(w.key_moment || "M")}</kbd>`;
    b.setAttribute("aria-label", w.moment_next || "");
  }

  nextMoment() {
    const M = this.P.moments || [];
    if (!M.length) return null;
    return M.find(([i]) => i > this.step) || M[0];
  }

  playLabel() {
    const w = this.P.words;
    const b = this.bar.querySelector('[data-act="play"]');
    const on = !!this.playing;
    b.innerHTML = `<span aria-hidden="true">${on ? "❚❚" : "▶"}</span> ${esc(on ? w.pause : w.play)} <kbd>${esc(w.key_space)}</kbd>`;
    b.title = w.play_help;
    b.setAttribute("aria-pressed", on ? "true" : "false");
    this.root.classList.toggle("kvs-playing", on);
  }

  act(a) {
    const last = this.P.frames.length - 1;
    if (a === "prev") this.go(this.step - 1);
    else if (a === "next") this.go(this.step + 1);
    else if (a === "reset") this.go(0);
    else if (a === "end") this.go(last);
    else if (a === "play") this.playing ? this.stop() : this.play();
    else if (a === "moment") { const m = this.nextMoment(); if (m) this.go(m[0]); }
  }

  play() {
    const last = this.P.frames.length - 1;
    if (this.step >= last) this.go(0);          // at the end, Play starts again from the prefill
    this.playing = setInterval(() => {
      if (this.step >= this.P.frames.length - 1) { this.stop(); return; }
      this.go(this.step + 1);
      if (this.step >= this.P.frames.length - 1) this.stop();
    }, 1000 / this.speed);
    this.playLabel();
  }

  stop() {
    if (this.playing) clearInterval(this.playing);
    this.playing = null;
    if (this.bar) this.playLabel();
  }

  go(i) {
    const last = this.P.frames.length - 1;
    i = Math.min(last, Math.max(0, i | 0));
    if (i === this.step && this.drawn === i) return;
    this.step = i;
    this.presentRows = this.defaultRows();      // presenter mode: fit() takes rows away where the charts need them
    this.render();
    this.urlLater();
    clearTimeout(this.reportTimer);
    this.reportTimer = setTimeout(() => this.report(), REPORT_MS);
  }

  report() {
    this.reportTimer = null;
    this.flushUrl();                 // Python's rerun reads the address: it names this step first
    if (this.step === this.reported || !this.setStateValue) return;
    this.reported = this.step;
    this.setStateValue("step", this.step);
  }

  // the address written after the press's frame is painted, not inside the press (see URL_MS)
  urlLater() {
    this.cancelUrl();
    this.urlFrame = requestAnimationFrame(() => {
      this.urlFrame = null;
      this.urlTimer = setTimeout(() => { this.urlTimer = null; this.writeUrl(); }, URL_MS);
    });
  }

  cancelUrl() {
    if (this.urlFrame) cancelAnimationFrame(this.urlFrame);
    clearTimeout(this.urlTimer);
    this.urlFrame = this.urlTimer = null;
  }

  // a pending address written now (a report, a click elsewhere that may rerun the page)
  flushUrl() {
    if (!this.urlFrame && !this.urlTimer) return;
    this.cancelUrl();
    this.writeUrl();
  }

  writeUrl() {
    // only on our own page (after a page switch this instance may linger until Streamlit removes it)
    if (!this.root.isConnected || !this.P || location.pathname !== this.path) return;
    const want = this.step ? "step=" + this.step : null;
    const parts = location.search.replace(/^\?/, "").split("&").filter((p) => p);
    const at = parts.findIndex((p) => p.split("=")[0] === "step");
    if (at >= 0 && parts[at] === want) return;
    if (at < 0 && want === null) return;
    if (at >= 0) { if (want) parts[at] = want; else parts.splice(at, 1); } else parts.push(want);
    const q = parts.length ? "?" + parts.join("&") : "";
    history.replaceState(history.state, "", location.pathname + q + location.hash);
  }

  // ------------------------------------------------------------ drawing one frame
  render(force) {
    const t0 = performance.now();
    const P = this.P;
    const f = P.frames[this.step];
    const S = this.S;
    const last = P.frames.length - 1;
    this.heading.textContent = f.heading;
    this.slider.value = String(this.step);
    this.slider.setAttribute("aria-valuetext", f.heading);
    for (const [act, off] of [["prev", this.step === 0], ["reset", this.step === 0],
                              ["next", this.step === last], ["end", this.step === last]]) {
      this.bar.querySelector(`[data-act="${act}"]`).disabled = off;
    }
    if (!this.theme || force) this.theme = themeOf(this.root);
    const figs = [];
    for (const name of REGIONS) {
      this.fill(this.regions[name], f[name] || [], figs);
    }
    this.drawNotice(f);
    this.setHTML(this.metricsEl, this.metricsHTML(f));
    this.setHTML(this.cacheEl, this.cacheHTML(f));
    const n = this.step;
    if (force) {                 // every figure drawn again: themed and fitted again (theme, width, height)
      this.resetPlots();
      this.figCache.clear();
      this.needs.clear();
      this.fits = 0;
    }
    const t1 = performance.now();
    this.drawFigs(figs, this.drawn === -1 && !this.firstDone).then(() => {
      this.firstDone = true;
      const log = (window.__kvsLog = window.__kvsLog || []);          // for bench/step_clicks.py
      log.push([n, t1 - t0, performance.now() - t0]);
      if (log.length > 500) log.splice(0, 250);
      if (this.step === n) {
        this.drawn = n;
        this.root.dataset.drawn = String(n);
        window.dispatchEvent(new Event(STEPPER_DRAWN));       // single charts waiting for it (plotly_view.js)
        this.tellDrawn();
        if (!this.present || this.fit()) this.root.dataset.fitted = String(n);   // tests wait for this
        document.documentElement.classList.remove("kvs-hold");   // the page shown now it is fitted (serve_files.py)
        this.prefetch();
      }
    }, (e) => { this.tellDrawn(); throw e; });    // a failed drawing must not hold the page back either
  }

  // what to notice on this event (first in presenter mode), the key moment it is, the jump it offers;
  // the lecture script's screen this event is, and the next one
  drawNotice(f) {
    const w = this.P.words;
    const n = f.notice;
    const moment = (this.P.moments || []).find(([i]) => i === this.step);
    this.noticeEl.hidden = !n;
    this.root.classList.toggle("kvs-noticed", !!n);    // presenter mode: the notice stands for the ✓ / ⌛ lines
    this.setHTML(this.noticeEl, n ? `<span class="kvs-nlabel">${esc(moment ? moment[1] : w.label)}</span>` +
      `<span class="kvs-ntext">${this.S(n.notice)}</span>` +
      (n.jump !== null && n.jump !== undefined && n.jump !== this.step
        ? ` <button type="button" class="kvs-btn kvs-jump" data-jump="${Number(n.jump)}">${esc(n.jl || "")} →</button>` : "")
      : "");
    const mb = this.bar.querySelector('[data-act="moment"]');
    const next = this.nextMoment();
    mb.title = next ? `${w.moment_next_help || ""} ${String(w.moment_at || "").replace("{i}", next[0])}: ${next[1]}` : "";
    // which of the run's moments M goes to ("2/2"; after the last one it starts again at "1/2")
    const all = this.P.moments || [];
    const mt = mb.querySelector(".kvs-mtext");
    if (mt && next) mt.textContent = ` ${w.moment_next || ""}` + (all.length > 1 ? ` ${all.indexOf(next) + 1}/${all.length}` : "");
    const L = (this.lecture || []).find(([i]) => i === this.step);
    this.lectureEl.hidden = !L;
    this.setHTML(this.lectureEl, L ? `<span>${esc(L[1])}</span>` + (L[2]
      ? ` · <a href="${esc(L[2])}" target="_self" title="${esc(L[3])}">${esc(w.lecture_next)} →</a>` : "") : "");
  }

  // The page may wait with its rest until this stepper's first drawing (step_view.whole_page: its
  // placeholder button): say once that it is done. The button may come after a fast drawing (a tab
  // that has plotly.js already): then watch for it a while.
  tellDrawn() {
    if (this.toldDrawn || !this.setTriggerValue) return;
    const send = () => {
      if (!this.root.isConnected || location.pathname !== this.path || !document.querySelector(".st-key-" + REST_KEY)) {
        return false;
      }
      this.toldDrawn = true;
      this.restWatch?.disconnect();
      clearTimeout(this.restTimer);
      this.setTriggerValue("drawn", true);
      return true;
    };
    if (send() || this.restWatch) return;
    this.restWatch = new MutationObserver(send);
    this.restWatch.observe(document.body, { childList: true, subtree: true });
    this.restTimer = setTimeout(() => this.restWatch?.disconnect(), 15000);
  }

  setHTML(el, html) {
    if (el._h !== html) { el.innerHTML = html; el._h = html; }
  }

  fill(region, blocks, figs) {
    const shown = this.visible(blocks);
    const kids = [...region.children];
    shown.forEach((b, i) => {
      const isFig = b.fig !== undefined;
      let el = kids[i];
      if (!el || el.classList.contains("kvs-figslot") !== isFig) {
        const fresh = document.createElement("div");
        fresh.className = isFig ? "kvs-figslot" : "kvs-blk";
        if (el) { this.purge(el); region.replaceChild(fresh, el); } else region.appendChild(fresh);
        kids[i] = el = fresh;
      }
      if (isFig) {
        // a pick grid holds controls: a group; a figure otherwise, not an img (plotly's toolbar buttons
        // inside must stay reachable: axe nested-interactive)
        el.setAttribute("role", b.pick && this.P.pick ? "group" : "figure");
        el.setAttribute("aria-label", b.alt || "");
        figs.push([el, b]);
      } else {
        this.setHTML(el, blockHTML(this.P, b, this.S, this.present));
      }
    });
    for (let i = kids.length - 1; i >= shown.length; i--) { this.purge(kids[i]); kids[i].remove(); }
  }

  visible(blocks) {
    return (blocks || []).filter((b) => !(this.present ? b.x : b.p)).flatMap((b) => {
      if (!(this.present && b.pick && this.P.pick)) return [b];
      // presenter mode: a pick grid sits behind a button (the step fits one screen without it)
      return this.pickOpen ? [{ fold: 1, open: true }, b] : [{ fold: 1, open: false }];
    });
  }

  purge(el) {
    for (const d of el.querySelectorAll(".kvs-fig")) { try { window.Plotly?.purge(d); } catch (e) { /* gone */ } }
    el.plots?.clear();
  }

  // Each figure is drawn once into its own div inside its slot; a step only shows another div.
  plot(slot, figIndex, alt, pick) {
    slot.plots = slot.plots || new Map();
    const h = this.heightOf(slot, figIndex);
    const key = figIndex + ":" + h;
    let p = slot.plots.get(key);
    if (p) return p;
    p = this.plotly.then((Plotly) => {
      const d = document.createElement("div");
      d.className = "kvs-fig";
      d.dataset.key = key;
      if (!Plotly) { d.textContent = this.plotlyError || "plotly did not load"; slot.appendChild(d); return d; }
      // drawn off to the side at the slot's width, then hidden until shown
      d.style.cssText = "visibility:hidden;position:absolute;left:0;right:0;top:0";
      slot.appendChild(d);
      let fig = this.figCache.get(key);
      if (!fig) { fig = themed(this.P.figs[figIndex], this.theme, h, slot.clientWidth); this.figCache.set(key, fig); }
      return Plotly.newPlot(d, fig.data, fig.layout, plotConfig(this.fmt, alt)).then(() => {
        if (pick && this.P.pick) this.pickGrid(d, fig);
        if (d.dataset.key !== slot.dataset.shown) d.style.cssText = "display:none";
        return d;
      });
    });
    slot.plots.set(key, p);
    return p;
  }

  // presenter mode: how many cache rows besides row 0 a step shows when the charts leave room
  defaultRows() {
    return window.innerHeight >= 1000 ? 5 : 3;
  }

  // presenter mode: a figure's height, its row's (fit) but never less than its labels need
  heightOf(slot, figIndex) {
    if (!this.present) return null;
    return Math.max(this.needOf(figIndex, slot.clientWidth), slot.rowH || this.chartHeight);
  }

  needOf(figIndex, width) {
    const key = figIndex + ":" + width;
    let h = this.needs.get(key);
    if (h === undefined) {
      h = Math.min(900, needHeight(this.P.figs[figIndex], this.theme.font, width || 700));
      this.needs.set(key, h);
    }
    return h;
  }

  // ``firstAlone`` (the page's first drawing): the first figure is painted before the others are
  // drawn, so a fresh page shows a chart ≈ 0.1 s sooner (the whole event one paint later); a step
  // press draws them all in one go, as one frame
  drawFigs(figs, firstAlone = false) {
    if (!figs.length) return Promise.resolve();
    if (firstAlone && figs.length > 1) {     // (a step pressed meanwhile takes over: the rest is left to it)
      const n = this.step;
      return this.drawFigs(figs.slice(0, 1))
        .then(() => new Promise((ok) => requestAnimationFrame(() => setTimeout(ok, 0))))
        .then(() => (this.step === n ? this.drawFigs(figs.slice(1)) : null));
    }
    return Promise.all(figs.map(([slot, b]) => {
      const key = b.fig + ":" + this.heightOf(slot, b.fig);
      slot.dataset.shown = key;
      return this.plot(slot, b.fig, b.alt, b.pick).then((d) => {
        if (slot.dataset.shown !== key) return;       // a later step took this slot meanwhile
        for (const c of slot.children) if (c !== d) c.style.display = "none";
        d.style.cssText = "";
        if (this.pickFocus && d.querySelector(".kvs-pick")) {     // a keyboard pick: back where it was
          const [r, c] = this.pickFocus;
          this.pickFocus = null;
          d.querySelector(`.kvs-pick [data-r="${r}"][data-c="${c}"]`)?.focus();
        }
      });
    }));
  }

  // while the browser is idle, draw the figures of the neighbouring events into their slots
  prefetch() {
    clearTimeout(this.prefetchTimer);
    this.prefetchTimer = setTimeout(() => {
      const todo = [this.step + 1, this.step - 1, this.step + 2].filter((i) => i >= 0 && i < this.P.frames.length);
      let chain = Promise.resolve();
      for (const i of todo) {
        const f = this.P.frames[i];
        for (const name of REGIONS) {
          const kids = this.regions[name].children;
          this.visible(f[name]).forEach((b, k) => {
            const slot = kids[k];
            if (b.fig !== undefined && slot && slot.classList.contains("kvs-figslot")) {
              chain = chain.then(() => new Promise((ok) => (window.requestIdleCallback || setTimeout)(ok)))
                .then(() => this.plot(slot, b.fig, b.alt, b.pick));
            }
          });
        }
      }
    }, 60);
  }

  resetPlots() {
    const a = document.activeElement;      // a focused pick cell is drawn again: focus it again then
    if (a && a.closest && a.closest(".kvs-pick") && this.root.contains(a)) this.pickFocus = [Number(a.dataset.r), Number(a.dataset.c)];
    for (const slot of this.root.querySelectorAll(".kvs-figslot")) this.purge(slot);
    for (const slot of this.root.querySelectorAll(".kvs-figslot")) { slot.replaceChildren(); slot.rowH = 0; }
  }

  // ------------------------------------------------------------ a pick grid over small multiples
  // Tile i = row · cols + col of the figure is trace i on one pair of axes, spanning x0 - 0.5 ..
  // x0 + T - 0.5 (kvviz.viz.attention.attention_model_view_spec), or, when the figure is one
  // heatmap of rows × cols cells (head_grid_spec), cell (row, col) at x0 + col, y0 + row: one
  // focusable cell over each tile, an ARIA grid (Tab enters at the chosen tile; arrows, Home, End
  // move; Enter or Space chooses).
  pickGrid(d, fig) {
    const G = this.P.pick;
    const fl = d._fullLayout;
    if (!fl || !fl.xaxis || !fl.yaxis) return;
    const one = fig.data.length === 1 && G.rows * G.cols > 1;
    const xa = fl.xaxis, ya = fl.yaxis;
    const px = (v) => xa._offset + xa.l2p(v), py = (v) => ya._offset + ya.l2p(v);
    const grid = document.createElement("div");
    grid.className = "kvs-pick";
    grid.setAttribute("role", "grid");
    grid.setAttribute("aria-label", G.label);
    for (let r = 0; r < G.rows; r++) {
      const row = document.createElement("div");
      row.setAttribute("role", "row");
      for (let c = 0; c < G.cols; c++) {
        const tr = one ? fig.data[0] : fig.data[r * G.cols + c];
        if (!tr || !tr.z || !tr.z.length) continue;
        const x0 = (tr.x0 || 0) + (one ? c : 0), y0 = (tr.y0 || 0) + (one ? r : 0);
        const T = one ? 1 : tr.z[0].length, N = one ? 1 : tr.z.length;
        const [l, rt] = [px(x0 - 0.5), px(x0 + T - 0.5)].sort((a, b) => a - b);
        const [t, b] = [py(y0 - 0.5), py(y0 + N - 0.5)].sort((a, b) => a - b);
        const cell = document.createElement("div");
        const sel = r === G.sel[0] && c === G.sel[1];
        cell.setAttribute("role", "gridcell");
        cell.setAttribute("aria-label", G.cells[r][c]);
        cell.setAttribute("aria-selected", sel ? "true" : "false");
        cell.tabIndex = sel ? 0 : -1;
        cell.title = G.cells[r][c];
        cell.dataset.r = String(r);
        cell.dataset.c = String(c);
        cell.style.cssText = `left:${l - 3}px;top:${t - 3}px;width:${rt - l + 6}px;height:${b - t + 6}px`;
        row.appendChild(cell);
      }
      grid.appendChild(row);
    }
    grid.addEventListener("mousedown", (e) => e.preventDefault());   // a click keeps the focus (and ← → step)
    grid.addEventListener("click", (e) => {
      const cell = e.target.closest("[role='gridcell']");
      if (cell) this.pick(Number(cell.dataset.r), Number(cell.dataset.c), false);
    });
    grid.addEventListener("keydown", (e) => this.pickKey(e, grid));
    d.appendChild(grid);
  }

  pickKey(e, grid) {
    const cell = e.target.closest("[role='gridcell']");
    if (!cell || e.ctrlKey || e.metaKey || e.altKey) return;
    const G = this.P.pick;
    let r = Number(cell.dataset.r), c = Number(cell.dataset.c);
    if (e.key === "Enter" || e.key === " ") {
      e.preventDefault();
      this.pick(r, c, true);
      return;
    }
    const move = { ArrowLeft: [0, -1], ArrowRight: [0, 1], ArrowUp: [-1, 0], ArrowDown: [1, 0] }[e.key];
    if (move) { r += move[0]; c += move[1]; }
    else if (e.key === "Home") c = 0;
    else if (e.key === "End") c = G.cols - 1;
    else return;
    e.preventDefault();
    const next = grid.querySelector(`[data-r="${Math.min(G.rows - 1, Math.max(0, r))}"][data-c="${Math.min(G.cols - 1, Math.max(0, c))}"]`);
    if (next) { cell.tabIndex = -1; next.tabIndex = 0; next.focus(); }
  }

  pick(r, c, byKeyboard) {
    const G = this.P.pick;
    if (!G || !this.setTriggerValue) return;
    if (r === G.sel[0] && c === G.sel[1]) return;          // already the one shown large
    for (const el of this.root.querySelectorAll(".kvs-pick [role='gridcell']")) {
      const on = Number(el.dataset.r) === r && Number(el.dataset.c) === c;
      el.setAttribute("aria-selected", on ? "true" : "false");
      el.classList.toggle("kvs-picked", on);                // shown at once; the new payload follows
    }
    this.pickFocus = byKeyboard ? [r, c] : null;
    if (this.reportTimer) { clearTimeout(this.reportTimer); this.report(); }   // a pending step goes first
    this.setTriggerValue("pick", [r, c]);
  }

  metricsHTML(f) {
    const m = f.metrics;
    if (!m) return "";
    const items = (m.items || []).map(([label, value, help, delta]) =>
      `<div class="kvs-metric"${help ? ` title="${esc(help)}"` : ""}><div class="kvs-mlabel">${esc(label)}</div>` +
      `<div class="kvs-mvalue">${esc(value)}</div>${delta ? `<div class="kvs-mdelta">${esc(delta)}</div>` : ""}</div>`);
    const badge = m.badge ? blockHTML(this.P, { alert: m.badge[0], text: m.badge[1] }, this.S) : "";
    const notes = (m.notes || []).map((n) => blockHTML(this.P, { note: n, x: 1 }, this.S)).join("");
    return `<div class="kvs-mrow" style="--kvs-n:${items.length + (badge ? 1 : 0)}">${items.join("")}` +
      `${badge ? `<div class="kvs-badge">${badge}</div>` : ""}</div>${this.present ? "" : notes}`;
  }

  cacheHTML(f) {
    const c = f.table;
    const T = this.P.table;
    if (!c || !T) return "";
    const S = this.S;
    const ids = c.ids;
    // presenter mode: row 0 (the oldest, which the newest query reads too), the rows this event
    // marks, and the newest, presentRows besides row 0; a row says how many are left out between
    // a long table lists the rows it draws (kvviz/ui/frames/llm.py fold_rows); the CSV keeps them all
    let shown = c.shown || ids.map((_, k) => k);
    if (this.present && ids.length > this.presentRows + 1) {
      const marked = [...(c.new || []), ...(c.rewritten || []), ...(c.struck || [])];
      // flagged cells (the weather page's stale key) and "keep" rows (a window's row evicted at this
      // event) are the step's point: their rows are never folded away
      const keep = new Set([0, ...(c.flagged || []).map(([r]) => r), ...(c.keep || [])]);
      const room = keep.size + this.presentRows - 1;       // presentRows besides row 0 and the kept rows
      for (const k of [...marked.sort((a, b) => b - a), ...ids.map((_, k) => ids.length - 1 - k)]) {
        if (keep.size > room) break;
        keep.add(k);
      }
      shown = [...keep].sort((a, b) => a - b);
    }
    const cols = this.present && T.present_cols ? T.present_cols : T.cols.map((_, i) => i);
    const cls = new Map();
    for (const i of c.new || []) cls.set(i, "new");
    for (const i of c.rewritten || []) cls.set(i, "rewritten");
    for (const i of c.evicted || []) cls.set(i, "evicted");
    for (const i of c.struck || []) cls.set(i, "struck");
    const flags = new Set((c.flagged || []).map(([r, col]) => r + ":" + col));
    const head = cols.map((i) => `<th scope="col">${esc(T.cols[i])}</th>`).join("");
    const gap = (n) => `<tr class="kvs-gap"><td colspan="${cols.length}">${esc(this.P.words.rows_hidden.replace("{n}", n))}</td></tr>`;
    const body = shown.map((r, k) => {
      const row = T.rows[ids[r]];
      return (k && r > shown[k - 1] + 1 ? gap(r - shown[k - 1] - 1) : "") +
        `<tr${cls.has(r) ? ` class="kvs-${cls.get(r)}"` : ""}>` + cols.map((i) =>
        `<td${flags.has(r + ":" + i) ? ' class="kvs-flag"' : ""}>${esc(row[i])}</td>`).join("") + "</tr>";
    }).join("") + (shown.length && shown[shown.length - 1] < ids.length - 1 ? gap(ids.length - 1 - shown[shown.length - 1]) : "");
    const csv = this.P.csv ? `<button type="button" class="kvs-btn kvs-csv">⤓ ${esc(this.P.words.csv)}</button>` : "";
    return `<div class="kvs-ttl"><strong>${esc(c.title)}</strong></div>` +
      (ids.length ? `<div class="kvs-tblwrap"${scrollable(c.title)}><table class="kvs-tbl kvs-cachetbl"><thead><tr>${head}</tr></thead>` +
        `<tbody>${body}</tbody></table></div>` : "") +
      (c.notes && !this.present ? `<div class="kvs-note">${S(c.notes)}</div>` : "") + csv;
  }

  downloadCsv() {
    const T = this.P.table;
    const f = this.P.frames[this.step];
    const lines = [T.csv_cols.map(csvCell).join(",")].concat(
      f.table.ids.map((id) => (T.csv_rows || T.rows)[id].map(csvCell).join(",")));
    const blob = new Blob([lines.join("\n") + "\n"], { type: "text/csv" });
    const a = document.createElement("a");
    a.href = URL.createObjectURL(blob);
    a.download = `${this.P.csv}_cache_step${this.step}.csv`;
    document.body.appendChild(a);
    a.click();
    setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
  }

  // ------------------------------------------------------------ presenter mode: one screen per step
  fit() {
    // the counters go beside the cache table when the table leaves them room (step_view.css); its
    // width changes with the rows shown
    const beside = () => {
      const tbl = this.cacheEl.querySelector("table");
      this.root.classList.toggle("kvs-beside", !!tbl && tbl.scrollWidth <= 0.7 * this.root.clientWidth);
    };
    beside();
    const avail = this.avail();
    // the figures shown, in rows (figures side by side are one row)
    const shown = [...this.root.querySelectorAll(".kvs-figslot")].map((slot) => {
      const d = [...slot.children].find((c) => c.dataset.key === slot.dataset.shown);
      return d && d.offsetParent !== null ? [slot, d.getBoundingClientRect(), Number(slot.dataset.shown.split(":")[0])] : null;
    }).filter(Boolean).sort((p, q) => p[1].top - q[1].top);
    if (!shown.length) return true;
    const rows = [];
    let rowBottom = -Infinity;
    for (const [slot, r, i] of shown) {
      if (r.top >= rowBottom - 1) rows.push({ slots: [], h: 0, need: 0 });
      const row = rows[rows.length - 1];
      row.slots.push(slot);
      row.h = Math.max(row.h, r.height);
      row.need = Math.max(row.need, this.needOf(i, slot.clientWidth));
      rowBottom = Math.max(rowBottom, r.bottom);
    }
    const height = () => this.contentHeight();
    let over = height() - avail;
    // too long: first the charts' height beyond what their labels need, then cache rows (row 0 and the
    // newest stay), then the step's text a size smaller, down to 64 % (its smallest text stays ≥ 11 px)
    const spare = rows.reduce((a, r) => a + Math.max(0, r.h - r.need), 0);
    const cut = over > 0 ? Math.min(over, spare) : 0;
    for (const r of rows) r.want = cut ? Math.floor(r.h - cut * Math.max(0, r.h - r.need) / spare) : r.h;
    while (over - cut > 0 && this.presentRows > 1) {
      this.presentRows -= 1;
      this.setHTML(this.cacheEl, this.cacheHTML(this.P.frames[this.step]));
      beside();
      over = height() - avail;
    }
    while (over - cut > 0 && this.scale > 0.64) {
      this.scale = Math.max(0.64, Math.round(100 * this.scale - 6) / 100);
      this.root.style.setProperty("--kvs-scale", String(this.scale));
      over = height() - avail;
    }
    // still too long (a long text's strip of tokens in three or four rows): its chips smaller, ≥ 11 px
    while (over - cut > 0 && this.chips > 0.7) {
      this.chips = Math.round(100 * this.chips - 6) / 100;
      this.root.style.setProperty("--kvs-chips", String(this.chips));
      over = height() - avail;
    }
    // room left: the charts grow into it, by a noticeable amount only (no redraw per step), 560 px at most
    if (!cut && over < -40) {
      const add = Math.floor((-over - 4) / rows.length);
      for (const r of rows) r.want = Math.min(560, r.h + add);
    }
    let again = false;
    for (const r of rows) {
      const h = Math.max(r.need, r.want);
      if (Math.abs(h - r.h) > 2) {
        for (const slot of r.slots) slot.rowH = h;
        again = true;
      }
    }
    if (again && this.fits++ < 6) {
      this.render();
      return false;
    }
    this.fits = 0;
    this.root.dataset.over = String(Math.round(over - cut));   // > 0: the step is longer than the screen (tests say so)
    this.scrollInPlace();
    this.keepInPlace();
    return true;
  }

  // the space below the header a presenter step may fill
  avail() {
    const header = document.querySelector("[data-testid='stHeader']");
    return window.innerHeight - (header ? header.getBoundingClientRect().bottom : 0) - 8;
  }

  // A fitted step that grew past the screen's edge afterwards (a late font, a scroll bar appearing
  // as the page's rest arrives: narrower, its table rows wrap): fitted once more, once per step.
  refitIfGrown() {
    const n = this.step;
    if (!this.present || this.refitted === n || this.drawn !== n || this.root.dataset.fitted !== String(n)) return;
    if (this.contentHeight() <= this.avail() + 2) return;
    this.refitted = n;
    delete this.root.dataset.fitted;
    if (this.fit()) this.root.dataset.fitted = String(n);     // else fit() drew again and marks it itself
  }

  // the step's own height (presenter mode's root is at least a screen high: step_view.css)
  contentHeight() {
    const top = this.root.getBoundingClientRect().top;
    let bottom = top;
    for (const el of this.root.children) {
      const r = el.getBoundingClientRect();
      if (r.height) bottom = Math.max(bottom, r.bottom + parseFloat(getComputedStyle(el).marginBottom || 0));
    }
    return bottom - top;
  }

  // the whole step in view, below the header
  scrollInPlace() {
    const header = document.querySelector("[data-testid='stHeader']");
    const top = header ? header.getBoundingClientRect().bottom : 0;
    const rect = this.root.getBoundingClientRect();
    if (rect.top < top || rect.top + this.contentHeight() > window.innerHeight + 1 || rect.top > top + 8) {
      this.root.style.scrollMarginTop = top + 4 + "px";
      this.root.scrollIntoView({ block: "start" });
    }
  }

  // For a few seconds after fitting, elements may still arrive above the step (the page's rerun
  // after the first drawing, a late font) and push it below the screen's edge: scroll it back,
  // until the lecturer scrolls, clicks or types (then the page is theirs).
  keepInPlace() {
    this.stopKeeping?.();
    const box = this.root.closest("[data-testid='stMainBlockContainer']") || document.body;
    const watch = new ResizeObserver(() => {
      if (!this.root.isConnected) return;
      this.refitIfGrown();
      this.scrollInPlace();
    });
    const stop = () => {
      watch.disconnect();
      clearTimeout(timer);
      for (const ev of KEEP_UNTIL) window.removeEventListener(ev, stop, true);
      if (this.stopKeeping === stop) this.stopKeeping = null;
    };
    // kept at least KEEP_MS, and while the page still runs (its whole rerun after the first drawing)
    const t0 = performance.now();
    const busy = () => document.querySelector("[data-testid='stApp']")?.getAttribute("data-test-script-state") === "running" ||
      document.querySelector(".st-key-" + REST_KEY);
    const check = () => { if (performance.now() - t0 < 15000 && busy()) timer = setTimeout(check, 500); else stop(); };
    let timer = setTimeout(check, KEEP_MS);
    for (const ev of KEEP_UNTIL) window.addEventListener(ev, stop, true);
    watch.observe(box);
    this.stopKeeping = stop;
  }
}

export default function (component) {
  const { data, parentElement, setStateValue } = component;
  installKeys();
  let s = parentElement.__kvs;
  if (!s || !s.root.isConnected) { s = new Stepper(parentElement); parentElement.__kvs = s; }
  // parse the payload once per payload (a rerun that resends the same text reuses it)
  // (the static export, kvviz/ui/export, hands it over already parsed: a script file, no fetch())
  if (s.raw !== data.payload) {
    s.parsed = typeof data.payload === "string" ? JSON.parse(data.payload) : data.payload;
    s.raw = data.payload;
  }
  s.presentRows = s.defaultRows();
  s.load(s.parsed, data, setStateValue, component.setTriggerValue);
  return () => { s.destroy(); if (parentElement.__kvs === s) delete parentElement.__kvs; };
}
