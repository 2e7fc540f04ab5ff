// kvviz chart: one plotly figure (kvviz/ui/components/charts.py), drawn like the stepper's figures (plotly_view.js
// comes before this file). data = {fig: {data, layout}, alt, fmt, plotly}.
// A chart is drawn once it comes near the screen: on a first visit the charts further down the page
// (the Paged cache page has eight) then leave the browser's one busy thread to what is in view.

class Chart {
  constructor(parent) {
    this.el = document.createElement("div");
    this.el.className = "kvc-chart";
    this.el.setAttribute("role", "figure");     // not an img: plotly's toolbar buttons inside stay reachable
    parent.appendChild(this.el);
    this.width = 0;
    // a chart drawn in a hidden tab, or before the sidebar folded, takes its real width when shown
    this.resizer = new ResizeObserver(() => {
      const w = this.el.clientWidth;
      if (this.el.dataset.drawn === "1" && w && Math.abs(w - this.width) > 1) {
        this.width = w;
        window.Plotly?.Plots.resize(this.el);
      }
    });
    this.resizer.observe(this.el);
    this.near = false;
    this.viewer = null;
  }

  // Streamlit's page scrolls inside its own container: "near" is measured against that (a margin on
  // the viewport would not reach below the container's edge)
  watch() {
    if (this.viewer || this.near) return;
    let root = this.el.parentElement;
    while (root && !/(auto|scroll)/.test(getComputedStyle(root).overflowY)) root = root.parentElement;
    this.viewer = new IntersectionObserver((seen) => {
      if (!seen.some((e) => e.isIntersecting)) return;
      this.near = true;
      this.viewer.disconnect();
      if (this.data) this.draw(this.data);
    }, { root, rootMargin: "400px 0px" });
    this.viewer.observe(this.el);
  }

  draw(data) {
    this.el.setAttribute("aria-label", data.alt || "");
    this.data = data;
    const gen = (this.gen = (this.gen || 0) + 1);   // a later draw wins over one still loading
    const fig = data.fig;
    this.el.style.minHeight = (Number(fig.layout && fig.layout.height) || 450) + "px";   // its room, drawn or not
    delete this.el.dataset.drawn;               // tests wait for this: the figure shown is this data's
    if (!this.near) {                           // drawn when it comes near the screen
      this.el.dataset.pending = "far";
      this.watch();
      return Promise.resolve();
    }
    delete this.el.dataset.pending;
    // the stepper checked once plotly is there: on a fresh browser the page's stepper exists by then
    // (in a tab that has plotly already, a chart above the stepper waits for it only if told: data.stepper)
    return loadPlotly(data.plotly).then((Plotly) => afterStepper(data.stepper).then(() => Plotly)).then((Plotly) => {
      if (gen !== this.gen || !this.el.isConnected) return false;
      this.el.querySelector(".kvc-error")?.remove();
      const f = themed(fig, themeOf(this.el), null, this.el.clientWidth);
      return Plotly.react(this.el, f.data, f.layout, plotConfig(data.fmt, data.alt)).then(() => true);
    }).then((done) => {
      if (!done || gen !== this.gen) return;
      this.width = this.el.clientWidth;
      this.el.dataset.drawn = "1";
    }).catch((e) => {                           // said in the page (no silent blank)
      if (gen !== this.gen) return;
      try { window.Plotly?.purge(this.el); } catch (err) { /* nothing drawn */ }
      const msg = document.createElement("p");
      msg.className = "kvc-error";
      msg.textContent = String((e && e.message) || e);
      this.el.replaceChildren(msg);
      this.el.dataset.drawn = "error";
    });
  }

  destroy() {
    this.resizer.disconnect();
    this.viewer?.disconnect();
    try { window.Plotly?.purge(this.el); } catch (e) { /* gone */ }
    this.el.remove();
  }
}

export default function (component) {
  const { data, parentElement } = component;
  let c = parentElement.__kvc;
  if (!c || !c.el.isConnected) { c = new Chart(parentElement); parentElement.__kvc = c; }
  const call = (c.calls = (c.calls || 0) + 1);
  c.draw(data);
  // Streamlit calls the cleanup of an earlier call when a later one has started: only the latest
  // call's cleanup (the element leaving the page) takes the chart down
  return () => {
    if (c.calls !== call) return;
    c.destroy();
    if (parentElement.__kvc === c) delete parentElement.__kvc;
  };
}
