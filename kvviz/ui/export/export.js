// kvviz's static export (kvviz/ui/export/site.py): mounts the stepper and the single charts on a page
// that no server sends, the way Streamlit mounts a component: it imports the component's module
// (assets/components.js holds each one as text, exactly as the live app's component receives it;
// imported from a blob: URL, since a page opened from file:// may not import a module file) and calls
// its default export with {name, key, data, parentElement, setStateValue, setTriggerValue}.
//
// What the live page would send to its server goes nowhere, or to the live app's link: the step
// the stepper reports keeps the "open in the live app" links on the step shown, and choosing a tile
// of the model view (a new payload, computed by the server) offers that view in the live app.
(() => {
  const modules = {};
  const data = {};

  // plotly.js is already loading (the page's first script, async): the components' own loadPlotly
  // (plotly_view.js) awaits this promise instead of loading it again, as on the live page, whose
  // preload (kvviz/ui/plotly_js.preload) starts it early too
  const tag = document.getElementById("kvx-plotly");
  if (tag && !window.__kvsPlotly) {
    window.__kvsPlotly = window.Plotly ? Promise.resolve(window.Plotly) : new Promise((ok, fail) => {
      tag.addEventListener("load", () => (window.Plotly ? ok(window.Plotly) : fail(new Error("plotly did not load"))));
      tag.addEventListener("error", () => fail(new Error("plotly did not load")));
    });
  }

  function module(name) {
    if (!modules[name]) {
      const url = URL.createObjectURL(new Blob([window.KVX_MODULES[name]], { type: "text/javascript" }));
      modules[name] = import(url).then((m) => m.default);
    }
    return modules[name];
  }

  // ?step=3 in this page's address opens event 3, as on the live page (the stepper writes it back)
  function urlStep(n, fallback) {
    const raw = new URLSearchParams(location.search).get("step");
    const step = raw === null || !/^\d+$/.test(raw) ? NaN : Number(raw);
    return step >= 0 && step < n ? step : fallback;
  }

  function liveAt(base, changes) {
    const u = new URL(base);
    for (const [k, v] of Object.entries(changes)) {
      if (v === null) u.searchParams.delete(k); else u.searchParams.set(k, String(v));
    }
    return u.href;
  }

  function setLive(cfg, step) {
    const href = liveAt(cfg.live, { step: step ? step : null });      // the live page leaves step 0 out
    for (const a of document.querySelectorAll("[data-kvx-live]")) a.href = href;
    cfg.step = step;
  }

  // A tile of the model view was chosen: its frames come from the live app's server.
  function picked(cfg, mount, el, mountData, rc) {
    const [r, c] = rc;
    const note = document.querySelector("[data-kvx-pick]");
    if (!note || !cfg.pick) return;
    const href = liveAt(cfg.live, { [cfg.pick[0]]: r + 1, [cfg.pick[1]]: c + 1, step: cfg.step || null });
    const a = document.createElement("a");
    a.href = href;
    a.textContent = cfg.pickText[1].replace("{layer}", r + 1).replace("{head}", c + 1);
    const [before, after] = cfg.pickText[0].split("{link}");
    note.replaceChildren(before, a, after || "");
    note.hidden = false;
    mount(mountData(el));             // draw the shown layer and head again (the tile marks too)
  }

  window.KVX = {
    data(id, value) { data[id] = value; },

    screen(cfg) {
      const D = data[cfg.data];
      const plotly = { bundle: new URL(cfg.plotly, document.baseURI).href, chunk: null };
      cfg.step = cfg.start;
      const el = document.querySelector("[data-kvx-stepper]");
      if (el && D.payload) {
        const start = urlStep(cfg.n, cfg.start);
        setLive(cfg, start);
        module("stepper").then((mount) => {
          let again = null;
          const mountData = (parent) => ({
            name: "kvviz_stepper", key: "kvs_export", parentElement: parent,
            data: { payload: D.payload, start, run: cfg.data, plotly, present: cfg.present, fmt: "png" },
            setStateValue: (k, v) => { if (k === "step") setLive(cfg, v | 0); },
            setTriggerValue: (k, v) => { if (k === "pick") picked(cfg, again, parent, mountData, v); },
          });
          again = (d) => mount(d);
          mount(mountData(el));
        });
      }
      const slots = document.querySelectorAll("[data-kvx-chart]");
      if (slots.length) {
        const style = document.createElement("style");
        style.textContent = window.KVX_MODULES.chart_css;
        document.head.appendChild(style);
        module("chart").then((mount) => {
          for (const slot of slots) {
            const c = D.charts[Number(slot.dataset.kvxChart)];
            mount({ name: "kvviz_chart", key: "kvc_" + slot.dataset.kvxChart, parentElement: slot,
                    data: { fig: c.fig, alt: c.alt, fmt: "png", plotly } });
          }
        });
      }
    },
  };
})();
