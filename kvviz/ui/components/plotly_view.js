// plotly.js for kvviz's components (the stepper, single charts): loading it, and drawing a figure in
// the page's theme. kvviz/ui/components/plotly_js.py puts this file before each component's own code.

// ---------------------------------------------------------------- plotly: our partial bundle, else Streamlit's chunk
// p = {bundle, chunk}: paths relative to Streamlit's static/js/index.*.js (see plotly_js.py). One
// load per browser tab, shared through window by the page's preload (plotly_js.preload runs this
// file too) and every component (each component's module has its own copy of this file); a failed
// load is tried again next time.
function loadScript(src) {
  return new Promise((ok, fail) => {
    const s = document.createElement("script");
    s.src = src;
    s.onload = () => (window.Plotly ? ok(window.Plotly) : fail(new Error("plotly did not load")));
    s.onerror = () => fail(new Error("plotly did not load"));
    document.head.appendChild(s);
  });
}
function loadPlotly(p) {
  if (window.Plotly) return Promise.resolve(window.Plotly);
  if (!window.__kvsPlotly) {
    const index = document.querySelector('script[src*="/static/js/index."]');
    const base = index ? index.src : new URL("static/js/", document.baseURI).href;
    window.__kvsPlotly = loadScript(new URL(p.bundle, base).href).catch((e) => {
      if (!p.chunk) throw e;
      return import(new URL(p.chunk, base).href).then(() => {
        if (!window.Plotly) throw new Error("plotly did not load");
        return window.Plotly;
      });
    }).catch((e) => {
      window.__kvsPlotly = null;
      throw e;
    });
  }
  return window.__kvsPlotly;
}

// ---------------------------------------------------------------- the stepper first
// A page's stepper is what it is about: a single chart on a page whose stepper has not drawn its first
// event yet waits for it (on a fresh browser both would share the one busy main thread), at most 2 s.
const STEPPER_DRAWN = "kvs-drawn";        // the stepper's event on window after each drawing
function afterStepper() {
  if (!document.querySelector(".kvs-root:not([data-drawn])")) return Promise.resolve();
  return new Promise((ok) => {
    const done = () => { clearTimeout(timer); window.removeEventListener(STEPPER_DRAWN, done); ok(); };
    const timer = setTimeout(done, 2000);
    window.addEventListener(STEPPER_DRAWN, done);
  });
}

// ---------------------------------------------------------------- theme for plotly, from Streamlit's CSS variables
function themeOf(el) {
  const cs = getComputedStyle(el);
  const v = (name, dflt) => (cs.getPropertyValue(name) || "").trim() || dflt;
  return {
    text: v("--st-text-color", "#31333F"),
    bg: v("--st-background-color", "#FFFFFF"),
    bg2: v("--st-secondary-background-color", "#F0F2F6"),
    border: v("--st-border-color", "rgba(49,51,63,0.2)"),
    font: v("--st-font", "sans-serif"),
  };
}

// what plotly's default template gave the axes (the template itself is not sent), in theme colours
const AXIS_KEY = /^[xy]axis\d*$/;       // xaxis, yaxis2, …
const AXIS = (th) => ({ automargin: true, gridcolor: th.border, zerolinecolor: th.border, linecolor: th.border,
  title: { standoff: 12 } });

// a figure in the page's theme, ``height`` px high (null: its own), margins fitted for ``width`` px
function themed(fig, th, height, width) {
  const layout = { ...fig.layout };
  layout.paper_bgcolor = "rgba(0,0,0,0)";
  layout.plot_bgcolor = "rgba(0,0,0,0)";
  layout.font = { ...(layout.font || {}), color: th.text, family: th.font };
  layout.hoverlabel = { bgcolor: th.bg2, bordercolor: th.border, font: { color: th.text } };
  if (layout.title && typeof layout.title === "object") {
    layout.title = { ...layout.title, font: { ...(layout.title.font || {}), color: th.text } };
  }
  for (const k of Object.keys(layout)) {
    if (AXIS_KEY.test(k)) {
      layout[k] = { ...AXIS(th), ...layout[k] };
    }
  }
  if (!layout.xaxis) layout.xaxis = AXIS(th);
  if (!layout.yaxis) layout.yaxis = AXIS(th);
  if (fig.data.length && fig.data.every((d) => d.type === "heatmap")) {   // no grid behind masked cells
    for (const k of Object.keys(layout)) if (AXIS_KEY.test(k)) layout[k] = { showgrid: false, ...layout[k] };
  }
  let data = fig.data;
  if (height) {
    layout.height = height;
    // the plot's height between the margins fitted for its labels (a shallow copy: nothing kept)
    const m = fitMargins({ data, layout: { ...layout } }, th.font, width || 700, height).layout.margin || {};
    const plotH = height - (m.t ?? 100) - (m.b ?? 80);
    dropStackedTitles(layout, plotH, th.font);
    const crowded = crowdedTexts(data, layout, plotH);
    if (crowded) {              // values printed over each other: colours and the colour bar instead
      data = data.map((d) => (d.type === "heatmap" && d.texttemplate ? { ...d, texttemplate: "" } : d));
    } else if (height < 230) {  // a short chart has no room for a colour bar: the cells carry their values
      data = data.map((d) => ("showscale" in d || d.type === "heatmap" ? { ...d, showscale: false } : d));
      if (layout.coloraxis) layout.coloraxis = { ...layout.coloraxis, showscale: false };
    }
  }
  layout.autosize = true;
  return fitMargins({ data, layout }, th.font, width || 700, height);
}

// Whether a heatmap's cell values would print over each other in a plot this high (a chart sized down to
// fit presenter mode's screen): rows thinner than the values' type. Rows: the y axis's range, else the
// heatmaps' y categories on that axis, else z's rows.
function crowdedTexts(data, layout, plotH) {
  return data.some((d) => {
    if (d.type !== "heatmap" || !d.texttemplate || !Array.isArray(d.z) || !d.z.length) return false;
    const ax = layout["yaxis" + String(d.yaxis || "y").slice(1)] || {};
    const frac = Array.isArray(ax.domain) ? Math.abs(ax.domain[1] - ax.domain[0]) : 1;
    let rows = d.z.length;
    if (Array.isArray(ax.range)) rows = Math.abs(ax.range[1] - ax.range[0]);
    else if (Array.isArray(d.y)) {
      rows = new Set(data.filter((e) => e.type === "heatmap" && (e.yaxis || "y") === (d.yaxis || "y") && Array.isArray(e.y))
        .flatMap((e) => e.y.filter((v) => v !== null && v !== undefined).map(String))).size || rows;
    }
    const size = (d.textfont && d.textfont.size) || (layout.font && layout.font.size) || 12;
    return (plotH * frac) / Math.max(1, rows) < 1.15 * size;
  });
}

// Subplots stacked on one side each with a y title (the speculative page's probabilities over the
// acceptance test): in a chart sized down to fit presenter mode's screen a title longer than its
// subplot runs into the next one's. Such titles are left out there (the legend and the hover name the
// values); a single y axis keeps its title, which has the whole height.
function dropStackedTitles(layout, plotH, family) {
  const titled = Object.keys(layout).filter((k) => AXIS_KEY.test(k) && k[0] === "y" && Array.isArray(layout[k].domain) &&
    layout[k].title && layout[k].title.text);
  if (titled.length < 2) return;
  const base = (layout.font && layout.font.size) || 12;
  for (const k of titled) {
    const ax = layout[k];
    if (textWidth(ax.title.text, titleSize(ax, base), family) > plotH * Math.abs(ax.domain[1] - ax.domain[0])) {
      layout[k] = { ...ax, title: { ...ax.title, text: "" } };
    }
  }
}

// ---------------------------------------------------------------- margins wide enough before the first drawing
// Plotly's automargin draws a figure, measures its tick labels, axis titles and colour bar, and, as the
// margins were too narrow for them, draws it all again: twice the work for most kvviz figures (a third
// of a fresh page's first drawing). fitMargins estimates those margins from the same texts first
// (measureText in the figure's font; constants fitted to plotly 4.1's placement, a few pixels to
// spare), so that plotly finds them wide enough and draws once. A figure with a legend beside the
// plot keeps its margins; where an estimate falls short, automargin widens the margin as before.
const PAD = 12;                 // plotly's room beyond whatever pushes a margin
let measureCtx = null;
// an axis title's type size: its own, else plotly's default (1.2 × the figure's font size)
function titleSize(ax, base) {
  return (ax.title && ax.title.font && ax.title.font.size) || Math.round(1.2 * base);
}
function textWidth(text, size, family) {
  measureCtx = measureCtx || document.createElement("canvas").getContext("2d");
  measureCtx.font = `${size}px ${family}`;
  return Math.max(0, ...String(text).split(/<\s*br\s*\/?>/i)      // "<" never before a letter: see plotly_js.preload
    .map((line) => measureCtx.measureText(line.replace(/<[^>]*>/g, "")).width));
}
// the widest tick label plotly writes for numbers in [lo, hi], as wide as that many 8s
function numberLabel(lo, hi) {
  const big = Math.max(Math.abs(lo), Math.abs(hi));
  const step = Math.abs(hi - lo) / 8 || 1;
  const s = big >= 1e4 ? "888.8k" : "8".repeat(Math.max(1, Math.floor(Math.log10(big || 1)) + 1)) +
    (step < 1 ? "." + "8".repeat(Math.min(4, Math.ceil(-Math.log10(step)))) : "");
  return (lo < 0 ? "−" : "") + s;
}
// an axis's tick labels as far as the figure says them: categories, tick texts, or a number template
function tickTexts(fig, key) {
  const ax = fig.layout[key];
  if (ax.visible === false || ax.showticklabels === false) return [];
  if (Array.isArray(ax.ticktext)) return ax.ticktext.map(String);
  if (Array.isArray(ax.tickvals) && ax.tickvals.every((v) => typeof v === "number")) return ax.tickvals.map(String);
  const letter = key[0], id = letter + key.slice(5);
  const texts = [], nums = (Array.isArray(ax.range) ? ax.range : []).filter((v) => typeof v === "number");
  for (const tr of fig.data) {
    if ((tr[letter + "axis"] || letter) !== id) continue;
    const values = Array.isArray(tr[letter]) ? tr[letter] : [];
    for (const v of values) (typeof v === "string" ? texts : nums).push(v);
    if (!values.length && Array.isArray(tr.z)) nums.push(0, ((letter === "x" ? tr.z[0] : tr.z) || []).length - 1);
    if (tr.type === "bar" && (tr.orientation === "h") === (letter === "x")) nums.push(0);
  }
  if (!nums.length) return texts;
  let lo = Infinity, hi = -Infinity;
  for (const v of nums) { if (v < lo) lo = v; if (v > hi) hi = v; }
  return texts.concat([numberLabel(lo, hi)]);
}
function fitMargins(fig, family, width, height) {
  try {
    return fitted(fig, family, width, height);
  } catch (e) {
    return fig;                 // a figure this does not understand: automargin as before
  }
}
function fitted(fig, family, width, height) {
  const L = fig.layout;
  const lg = L.legend || {};
  const inside = [lg.x, lg.y].every((v) => typeof v === "number" && v >= 0 && v <= 1);   // pushes no margin
  if ((L.margin && L.margin.autoexpand === false) || (!inside && (L.showlegend ||
      fig.data.filter((d) => d.type !== "heatmap" && d.showlegend !== false).length > 1))) return fig;
  const base = (L.font && L.font.size) || 12;
  const need = {};
  const more = (side, px) => { need[side] = Math.max(need[side] || 0, px); };
  for (const key of Object.keys(L)) {
    if (!AXIS_KEY.test(key) || !L[key] || L[key].visible === false || L[key].automargin === false) continue;
    const ax = L[key];
    const size = (ax.tickfont && ax.tickfont.size) || base;
    const texts = tickTexts(fig, key);
    let w = 0;
    for (const t of texts) w = Math.max(w, textWidth(t, size, family));
    const a = Number.isFinite(ax.tickangle) ? Math.abs(ax.tickangle) * Math.PI / 180 : 0;
    const sin = Math.abs(Math.sin(a)), cos = Math.abs(Math.cos(a));
    const tsize = titleSize(ax, base);
    const title = !(ax.title && ax.title.text) ? 0 : ax.title.standoff === undefined ? tsize : 0.7 * tsize + ax.title.standoff;
    if (key[0] === "x") {
      const labels = texts.length ? w * sin + (size + 13) * cos + 0.7 * size * sin : 0;
      more(ax.side === "top" ? "t" : "b", labels + title + PAD);
      if (texts.length && a) more("l", textWidth(texts[0], size, family) * cos + PAD);   // the first label, slanted
    } else {
      more(ax.side === "right" ? "r" : "l", (texts.length ? w + 7 : 0) + title + PAD);
    }
  }
  // colour bars (a heatmap's own, or the shared coloraxis), beside the plot at 1.02 of its width
  const bars = fig.data.filter((d) => d.type === "heatmap" && !d.coloraxis && d.showscale !== false)
    .map((d) => [d.colorbar || {}, d.zmin ?? 0, d.zmax ?? 1]);
  if (L.coloraxis && L.coloraxis.showscale !== false) {
    bars.push([L.coloraxis.colorbar || {}, L.coloraxis.cmin ?? 0, L.coloraxis.cmax ?? 1]);
  }
  for (const [cb, lo, hi] of bars) {
    if (cb.x !== undefined) return fig;                     // placed by hand: left to automargin
    const size = (cb.tickfont && cb.tickfont.size) || base;
    const plot = 0.02 * Math.max(0, width - (need.l || 80) - 100);
    const labels = (cb.thickness ?? 30) + textWidth(numberLabel(lo, hi), size, family) + 30;
    const title = cb.title && cb.title.text ? 1.2 * textWidth(cb.title.text, (cb.title.font && cb.title.font.size) || base, family) + 34 : 0;
    more("r", plot + Math.max(labels, title) + 4);
  }
  // never narrower than before; never leaving the plot less than 64 px (plotly's own floor)
  const before = { l: 80, r: 80, t: 100, b: 80, ...(L.margin || {}) };
  const m = { ...before };
  for (const [s, px] of Object.entries(need)) if (Number.isFinite(px)) m[s] = Math.max(before[s], Math.ceil(px + 4));
  const h = height || L.height || 450;
  if (m.l + m.r > width - 64) { m.l = before.l; m.r = before.r; }
  if (m.t + m.b > h - 64) { m.t = before.t; m.b = before.b; }
  return { data: fig.data, layout: { ...L, margin: m } };
}

// plotly's config: no logo; the toolbar's download in the app's chosen format, named after the chart
function plotConfig(fmt, alt) {
  return {
    displaylogo: false,
    toImageButtonOptions: { format: fmt || "png", filename: "kvviz_" + (alt || "chart").toLowerCase()
      .replace(/[^a-z0-9]+/g, "_").replace(/^_|_$/g, "").slice(0, 60), scale: 2 },
  };
}
