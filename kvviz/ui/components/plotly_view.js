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
// ``below``: the page's stepper comes after the chart, so it waits even while that is not in the page yet.
const STEPPER_DRAWN = "kvs-drawn";        // the stepper's event on window after each drawing
function afterStepper(below = false) {
  const waiting = below ? !document.querySelector(".kvs-root[data-drawn]")
    : document.querySelector(".kvs-root:not([data-drawn])");
  if (!waiting) return Promise.resolve();
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
  if (!layout.uniformtext) layout.uniformtext = { mode: "show", minsize: MIN_TEXT };   // no bar value shrunk unreadable
  placeTitle(layout, th.font, width || 700);
  placeLegend(layout);
  wrapHeads(layout, fig.data, th.font, width || 700);
  // (a single chart has its own height: a chart made lower for presenter mode wraps its y title too)
  wrapYTitles(layout, height || layout.height || 450, th.font);
  let data = fig.data;
  if (height) {
    layout.height = height;
    // the plot's height between the margins fitted for its labels (a shallow copy: nothing kept)
    const m = fitMargins({ data, layout: { ...layout } }, th.font, width || 700, height).layout.margin || {};
    const plotH = height - (m.t ?? 100) - (m.b ?? 80);
    dropStackedTitles(layout, plotH, th.font);
    const crowded = crowdedTexts(data, layout, plotH, (width || 700) - (m.l ?? 80) - (m.r ?? 80), th.font);
    if (crowded) {              // values printed over each other: colours and the colour bar instead
      data = data.map((d) => (d.type === "heatmap" && d.texttemplate ? { ...d, texttemplate: "" } : d));
    } else if (plotH < COLORBAR_PLOT && data.some(printsValues)) {
      // a short chart has no room for a colour bar: the cells carry their values
      data = data.map((d) => ("showscale" in d || d.type === "heatmap" ? { ...d, showscale: false } : d));
      if (layout.coloraxis) layout.coloraxis = { ...layout.coloraxis, showscale: false };
    }
  }
  layout.autosize = true;
  return fitMargins({ data, layout }, th.font, width || 700, height);
}

const COLORBAR_PLOT = 140;       // px of plot a colour bar needs (its title takes some of its length)
// a heatmap that prints its cells' values
function printsValues(d) {
  return d.type === "heatmap" && !!d.texttemplate && Array.isArray(d.text) && d.text.some((r) => (Array.isArray(r) ? r : [r]).some((v) => v !== "" && v != null));
}

// Whether a heatmap's cell values would print over each other in a plot this high (a chart sized down to
// fit presenter mode's screen): rows thinner than the values' type. Rows: the y axis's range, else the
// heatmaps' y categories on that axis, else z's rows.
function crowdedTexts(data, layout, plotH, plotW, family) {
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
    if ((plotH * frac) / Math.max(1, rows) < 1.15 * size) return true;
    // columns narrower than the widest value (a decode row of many positions)
    const xa = layout["xaxis" + String(d.xaxis || "x").slice(1)] || {};
    const xfrac = Array.isArray(xa.domain) ? Math.abs(xa.domain[1] - xa.domain[0]) : 1;
    const cols = Array.isArray(xa.range) ? Math.abs(xa.range[1] - xa.range[0]) : (d.z[0] || []).length;
    const texts = Array.isArray(d.text) ? d.text.flat().filter((v) => v !== null && v !== undefined && v !== "") : [];
    if (!texts.length || !cols) return false;
    let widest = "";
    for (const v of texts) if (String(v).length > widest.length) widest = String(v);
    return (plotW * xfrac) / cols < textWidth(widest, size, family) + 4;
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

// ---------------------------------------------------------------- titles and legends that keep out of each other's way
const MIN_TEXT = 11;            // px: the smallest text a projector's last row still reads
const BR = "\x3cbr>";          // plotly's line break, spelled so ("<" before a letter: see plotly_js.preload)
const BREAK = /\x3c\s*br\s*\/?>/i;

// Plotly centres a title in the top margin, so a margin grown for a legend above the plot moves
// the title down onto it. Pinned to the figure's top edge instead, with its lines wrapped to the
// figure's width (a title longer than the figure was cut at both ends).
function placeTitle(layout, family, width) {
  const t = layout.title;
  if (!t || typeof t !== "object" || !t.text || t.y !== undefined) return;
  const size = (t.font && t.font.size) || Math.round(1.4 * ((layout.font && layout.font.size) || 12));
  const lines = String(t.text).split(BREAK);
  const room = width - 24;
  if (!/[<>]/.test(lines[0]) && textWidth(lines[0], size, family) > room) {
    const words = lines[0].split(" "), out = [];
    let cur = "";
    for (const w of words) {
      const next = cur ? cur + " " + w : w;
      if (cur && textWidth(next, size, family) > room) { out.push(cur); cur = w; } else cur = next;
    }
    out.push(cur);
    lines.splice(0, 1, ...out);
  }
  // (plotly lifts a title of several lines by about 0.7 em, however many: padded down that much)
  layout.title = { ...t, text: lines.join(BR), y: 1, yref: "container", yanchor: "top",
    pad: { ...(t.pad || {}), t: 8 + (lines.length > 1 ? Math.round(0.7 * size) : 0) } };
}

// the subplot titles above side-by-side panels (annotations at the plot's top edge)
function headNotes(layout) {
  return (layout.annotations || []).filter((a) => a.yref === "paper" && a.y >= 1 && a.yanchor === "bottom");
}

// Side-by-side panels' titles (the weather page's four heads) wider than their panel ran into each
// other: wrapped at spaces onto lines as wide as a panel, and where one word is still wider, all of
// them a size smaller, never below MIN_TEXT. A panel's width: the distance between neighbouring
// titles' centres, of the plot left between the fitted side margins.
function wrapHeads(layout, data, family, width) {
  const heads = headNotes(layout);
  if (heads.length < 2 || heads.some((a) => a.xref !== "paper" || typeof a.text !== "string" || BREAK.test(a.text))) return;
  const xs = heads.map((a) => a.x).sort((a, b) => a - b);
  let step = 1;
  for (let i = 1; i < xs.length; i++) step = Math.min(step, xs[i] - xs[i - 1]);
  const m = fitMargins({ data, layout: { ...layout } }, family, width, 4000).layout.margin || {};
  const room = 0.96 * step * Math.max(100, width - (m.l ?? 80) - (m.r ?? 80));
  const base = (layout.font && layout.font.size) || 12;
  const wrap = (text, size) => {
    const out = [];
    let cur = "";
    for (const w of text.split(" ")) {
      const next = cur ? cur + " " + w : w;
      if (cur && textWidth(next, size, family) > room) { out.push(cur); cur = w; } else cur = next;
    }
    return out.concat([cur]);
  };
  const size0 = Math.max(...heads.map((a) => (a.font && a.font.size) || base));
  if (heads.every((a) => textWidth(a.text, (a.font && a.font.size) || base, family) <= room)) return;
  let size = size0;
  while (size > MIN_TEXT && heads.some((a) => wrap(a.text, size).some((l) => textWidth(l, size, family) > room))) size--;
  layout.annotations = (layout.annotations || []).map((a) => (heads.includes(a)
    ? { ...a, text: wrap(a.text, size).join(BR), font: { ...(a.font || {}), size } } : a));
}

// a title's height in px (its lines; a smaller second line, as the builders' sup subtitles, counted whole)
function titleHeight(layout) {
  const t = layout.title;
  if (!t || !t.text) return 0;
  const size = (t.font && t.font.size) || Math.round(1.4 * ((layout.font && layout.font.size) || 12));
  const lines = String(t.text).split(BREAK).length;
  return lines * Math.round(1.3 * size) + 8;
}

// A horizontal legend below the plot sat at a fraction of the plot's height under it, so on a short
// chart it ran into the x axis's labels: it goes to the figure's bottom edge, with room kept for it.
function placeLegend(layout) {
  const lg = layout.legend;
  if (!lg || lg.orientation !== "h" || !(typeof lg.y === "number" && lg.y < 0) || lg.yref) return;
  layout.legend = { ...lg, y: 0, yref: "container", yanchor: "bottom" };
}

// the legend's entries (plotly's rule: shown for more than one entry, or when asked)
function legendNames(fig) {
  const L = fig.layout;
  if (L.showlegend === false) return [];
  const names = fig.data.filter((d) => d.visible !== false && (d.showlegend ?? d.type !== "heatmap") &&
    d.name !== undefined && d.name !== "").map((d) => String(d.name));
  return L.showlegend || names.length > 1 ? names : [];
}

// px a horizontal legend takes at ``width`` (the plot's): entries wrapped into rows as plotly does
// (symbol, gap, text): all in one row if they fit there, else every entry as wide as the widest one
// (plotly's columns), as many of those a row as fit
function legendHeight(fig, family, width) {
  const names = legendNames(fig);
  if (!names.length) return 0;
  const lg = fig.layout.legend || {};
  const size = (lg.font && lg.font.size) || (fig.layout.font && fig.layout.font.size) || 12;
  const ws = names.map((n) => 46 + textWidth(n, size, family));
  let rows = 1;
  if (ws.reduce((a, b) => a + b, 0) > width) {
    const perRow = Math.max(1, Math.floor((width + 5) / Math.max(...ws)));
    rows = Math.ceil(names.length / perRow);
  }
  return rows * Math.round(1.6 * size) + 6;
}

// A y title longer than the figure is high was cut at both ends: wrapped onto lines that fit.
function wrapYTitles(layout, height, family) {
  const base = (layout.font && layout.font.size) || 12;
  for (const k of Object.keys(layout)) {
    if (!AXIS_KEY.test(k) || k[0] !== "y" || !layout[k].title || !layout[k].title.text) continue;
    const ax = layout[k], text = String(ax.title.text), size = titleSize(ax, base);
    if (BREAK.test(text) || /[<>]/.test(text) || textWidth(text, size, family) <= height - 16) continue;
    const words = text.split(" ");
    let best = null;
    for (let i = 1; i < words.length; i++) {
      const a = words.slice(0, i).join(" "), b = words.slice(i).join(" ");
      const w = Math.max(textWidth(a, size, family), textWidth(b, size, family));
      if (!best || w < best[0]) best = [w, a + BR + b];
    }
    if (best) layout[k] = { ...ax, title: { ...ax.title, text: best[1] } };
  }
}

// The height a figure needs at ``width`` so that nothing in it is squashed: the margins its labels,
// title and legend need, and a plot with room for every row it labels (a heatmap's rows with their
// values, a bar chart's categories with theirs) or, on a numeric axis, three ticks; room for a colour
// bar; a y title not longer than the figure. Presenter mode sizes charts no smaller.
function needHeight(fig, family, width) {
  const layout = { ...fig.layout };
  placeTitle(layout, family, width);
  placeLegend(layout);
  wrapHeads(layout, fig.data, family, width);
  const m = fitMargins({ data: fig.data, layout }, family, width, 4000).layout.margin || {};
  const base = (layout.font && layout.font.size) || 12;
  let plot = 0, titleW = 0;
  const keys = Object.keys(layout).filter((k) => AXIS_KEY.test(k) && k[0] === "y");
  if (!keys.length) keys.push("yaxis");
  for (const k of keys) {
    const ax = layout[k] || {}, id = "y" + k.slice(5);
    const frac = Array.isArray(ax.domain) ? Math.abs(ax.domain[1] - ax.domain[0]) || 1 : 1;
    const tick = ax.visible === false || ax.showticklabels === false ? 0 : ((ax.tickfont && ax.tickfont.size) || base);
    let rows = 0, rowPx = 1.4 * tick;
    for (const d of fig.data) {
      if ((d.yaxis || "y") !== id) continue;
      if (d.type === "heatmap" && Array.isArray(d.z)) {
        const n = Array.isArray(ax.range) ? Math.min(d.z.length, Math.ceil(Math.abs(ax.range[1] - ax.range[0]))) : d.z.length;
        rows = Math.max(rows, n);
        // cells that print nothing: 8 px, or what the figure asks for (layout.meta.cell_px)
        const text = d.texttemplate ? 1.3 * ((d.textfont && d.textfont.size) || base) : ((layout.meta && layout.meta.cell_px) || 8);
        rowPx = Math.max(rowPx, text + (d.ygap || 0));
      } else if (d.type === "bar" && d.orientation === "h" && Array.isArray(d.y)) {
        rows = Math.max(rows, new Set(d.y.map(String)).size);
        if (d.text !== undefined || d.texttemplate) rowPx = Math.max(rowPx, 1.35 * ((d.textfont && d.textfont.size) || base) / 0.8);
      }
    }
    plot = Math.max(plot, (rows ? rows * rowPx : 90) / frac);
    if (ax.title && ax.title.text) {
      titleW = Math.max(titleW, ...String(ax.title.text).split(BREAK).map((x) => textWidth(x, titleSize(ax, base), family) * 0.6));
    }
  }
  // a colour bar, unless the cells print their values (then a short chart leaves it out: themed)
  const bars = fig.data.some((d) => d.type === "heatmap" && !d.coloraxis && d.showscale !== false) ||
    (layout.coloraxis && layout.coloraxis.showscale !== false);
  if (bars && !fig.data.some(printsValues)) plot = Math.max(plot, COLORBAR_PLOT);
  // (fitMargins leaves a plot no less than 64 px, else it keeps the figure's own margins: too narrow
  // for a title above a wrapped legend)
  plot = Math.max(plot, PLOT_FLOOR);
  return Math.ceil(Math.max((m.t ?? 100) + (m.b ?? 80) + plot, titleW));
}

// ---------------------------------------------------------------- margins wide enough before the first drawing
// Plotly's automargin draws a figure, measures its tick labels, axis titles and colour bar, and, as the
// margins were too narrow for them, draws it all again: twice the work for most kvviz figures (a third
// of a fresh page's first drawing). fitMargins estimates those margins from the same texts first
// (measureText in the figure's font; constants fitted to plotly 4.1's placement, a few pixels to
// spare), so that plotly finds them wide enough and draws once. A figure with a legend beside the
// plot keeps its margins; where an estimate falls short, automargin widens the margin as before.
const PAD = 12;                 // plotly's room beyond whatever pushes a margin
const PLOT_FLOOR = 64;          // px: the least plot fitMargins leaves between the margins (plotly's own floor)
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
  const flat = lg.orientation === "h" && typeof lg.y === "number" && (lg.y >= 1 || lg.yref === "container");
  if ((L.margin && L.margin.autoexpand === false) || (!inside && !flat && (L.showlegend ||
      fig.data.filter((d) => d.type !== "heatmap" && d.showlegend !== false).length > 1))) return fig;
  const base = (L.font && L.font.size) || 12;
  const need = {};
  const more = (side, px) => { need[side] = Math.max(need[side] || 0, px); };
  let under = 0;                 // the x axes' labels below the plot (a legend at the bottom edge goes under them)
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
    const title = !(ax.title && ax.title.text) ? 0 : (ax.title.standoff === undefined ? tsize : 0.7 * tsize + ax.title.standoff) +
      (String(ax.title.text).split(BREAK).length - 1) * Math.round(1.3 * tsize);   // a wrapped title's further lines
    if (key[0] === "x") {
      const labels = texts.length ? w * sin + (size + 13) * cos + 0.7 * size * sin : 0;
      if (ax.side !== "top") under = Math.max(under, labels + title + PAD);
      more(ax.side === "top" ? "t" : "b", labels + title + PAD);
      if (texts.length && a) more("l", textWidth(texts[0], size, family) * cos + PAD);   // the first label, slanted
    } else {
      more(ax.side === "right" ? "r" : "l", (texts.length ? w + 7 : 0) + title + PAD);
    }
  }
  // notes beside the plot (the smaller cache's weight on the sinks, one per row), as wide as they are
  for (const a of L.annotations || []) {
    if (a.xref === "paper" && a.x >= 1 && a.xanchor === "left" && a.text) {
      more("r", textWidth(a.text, (a.font && a.font.size) || base, family) + 8);
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
  // the title (pinned to the top edge: placeTitle), subplot titles and a legend above the plot share
  // the top margin; a legend at the bottom edge comes below the x axis's labels. The legend wraps at
  // the plot's width, the one left between the side margins found above.
  const sideM = (s) => Math.max(((L.margin && L.margin[s]) ?? 80), Number.isFinite(need[s]) ? Math.ceil(need[s] + 4) : 0);
  const plotW = Math.max(100, width - sideM("l") - sideM("r"));
  const legendH = flat ? legendHeight(fig, family, plotW) : 0;
  const heads = headNotes(L).map((a) => String(a.text || "").split(BREAK).length * Math.round(1.3 * ((a.font && a.font.size) || base)) + 4);
  const titled = L.title && L.title.yref === "container";
  if (titled) more("t", titleHeight(L) + (legendH && lg.yref !== "container" ? legendH + 4 : 0) + Math.max(0, ...heads) + 4);
  const bottomLegend = lg.yref === "container" && legendH ? legendH + 4 : 0;
  if (bottomLegend) more("b", Math.max(under, PAD) + bottomLegend);
  // never narrower than before; never leaving the plot less than 64 px (plotly's own floor)
  const before = { l: 80, r: 80, t: 100, b: 80, ...(L.margin || {}) };
  const m = { ...before };
  for (const [s, px] of Object.entries(need)) if (Number.isFinite(px)) m[s] = Math.max(before[s], Math.ceil(px + 4));
  const h = height || L.height || 450;
  if (m.l + m.r > width - PLOT_FLOOR) { m.l = before.l; m.r = before.r; }
  if (m.t + m.b > h - PLOT_FLOOR) { m.t = before.t; m.b = before.b; }
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
