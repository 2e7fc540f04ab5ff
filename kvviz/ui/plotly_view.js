// plotly.js for kvviz's components (the stepper, single charts): loading it, and drawing a figure in
// the page's theme. kvviz/ui/plotly_js.py puts this file before each component's own code.

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
const AXIS = (th) => ({ automargin: true, gridcolor: th.border, zerolinecolor: th.border, linecolor: th.border,
  title: { standoff: 12 } });

function themed(fig, th, height) {
  const layout = { ...fig.layout };
  layout.paper_bgcolor = "rgba(0,0,0,0)";
  layout.plot_bgcolor = "rgba(0,0,0,0)";
  layout.font = { ...(layout.font || {}), color: th.text, family: th.font };
  layout.hoverlabel = { bgcolor: th.bg2, bordercolor: th.border, font: { color: th.text } };
  if (layout.title && typeof layout.title === "object") {
    layout.title = { ...layout.title, font: { ...(layout.title.font || {}), color: th.text } };
  }
  for (const k of Object.keys(layout)) {
    if (/^[xy]axis\d*$/.test(k)) {
      layout[k] = { ...AXIS(th), ...layout[k] };
    }
  }
  if (!layout.xaxis) layout.xaxis = AXIS(th);
  if (!layout.yaxis) layout.yaxis = AXIS(th);
  if (fig.data.length && fig.data.every((d) => d.type === "heatmap")) {   // no grid behind masked cells
    for (const k of Object.keys(layout)) if (/^[xy]axis\d*$/.test(k)) layout[k] = { showgrid: false, ...layout[k] };
  }
  let data = fig.data;
  if (height) {
    layout.height = height;
    if (height < 230) {         // a short chart has no room for a colour bar: the cells carry their values
      data = data.map((d) => ("showscale" in d || d.type === "heatmap" ? { ...d, showscale: false } : d));
      if (layout.coloraxis) layout.coloraxis = { ...layout.coloraxis, showscale: false };
    }
  }
  layout.autosize = true;
  return { data, layout };
}

// plotly's config: no logo; the toolbar's download in the app's chosen format, named after the chart
function plotConfig(fmt, alt) {
  return {
    displaylogo: false,
    toImageButtonOptions: { format: fmt || "png", filename: "kvviz_" + (alt || "chart").toLowerCase()
      .replace(/[^a-z0-9]+/g, "_").replace(/^_|_$/g, "").slice(0, 60), scale: 2 },
  };
}
