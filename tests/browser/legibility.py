"""What a reader at the back of a lecture hall can read: one ``page.evaluate`` that scans every text
box shown (HTML text and plotly's SVG text) and every plotly figure, and lists what is not readable.

``SCAN(opts)`` returns ``{"problems": [str, ...], "texts": n, "figs": n}``. A problem is one of

- **small**: a chart's text drawn smaller than ``opts.min_px`` (its computed size times the scale
  plotly may shrink a bar's inside text by), HTML text smaller than ``opts.min_text`` (default
  ``min_px``);
- **overlap**: two texts of one figure, or two texts of the HTML around them, sharing more than
  2 px each way (their real, possibly slanted, outlines);
- **crowded**: two upright tick labels of one axis whose line boxes touch (more than 1 px deep),
  although their letters may not overlap yet (a numeric axis squeezed below what its ticks need);
- **cut**: a figure's text reaching past the figure's edge (a title plotly could not place);
- **on bars**: an annotation over a bar (a note printed on the values it explains);
- **squashed**: a subplot less than ``opts.min_plot`` px high, a category axis showing fewer labels
  than it has rows in view, heatmap rows thinner than the values they print, a colour bar shorter
  than 60 px (a raster, ``layout.meta.raster``: a map of many rows read as one image and labelled
  every few rows, has no row checks);
- **off screen**: (``opts.screen``) a text of the stepper's strip, charts or cache table outside the
  window (below the header).

Text hidden by CSS (``checkVisibility``), empty, or of a figure waiting hidden for a later step is
not scanned. ``opts.scope`` is the selector of the roots whose text is scanned (``.kvs-root``, the
stepper; ``[data-testid='stMain']`` for a whole page); ``opts.html`` false scans the figures only.
"""

SCAN = r"""(opts) => {
  const minPx = opts.min_px || 11, minText = opts.min_text || minPx, minPlot = opts.min_plot || 40;
  const problems = [];
  const say = (kind, where, what) => { if (problems.length < 40) problems.push(`${kind}: ${where}: ${what}`); };
  const vis = (el) => el.checkVisibility({ opacityProperty: true, visibilityProperty: true });
  const header = document.querySelector("[data-testid='stHeader']");
  const topEdge = header ? header.getBoundingClientRect().bottom : 0;
  const roots = [...document.querySelectorAll(opts.scope || ".kvs-root")].filter(vis);
  const short = (s) => JSON.stringify(String(s).trim().slice(0, 28));
  // a quad's corners in screen px, from an element's own box (SVG: slanted by its transform)
  const quadOf = (el) => {
    if (el instanceof SVGGraphicsElement) {
      const b = el.getBBox(), m = el.getScreenCTM();
      if (!m || !b.width || !b.height) return null;
      const P = (x, y) => [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f];
      return [P(b.x, b.y), P(b.x + b.width, b.y), P(b.x + b.width, b.y + b.height), P(b.x, b.y + b.height)];
    }
    return null;
  };
  const rectQuad = (r) => [[r.left, r.top], [r.right, r.top], [r.right, r.bottom], [r.left, r.bottom]];
  // a text's box is its line (ascent to descent, about 1.2 em); its letters fill the middle 70 %
  const inked = (q) => {
    const [a, b, c, d] = q, k = 0.15;
    const mix = (p, r, t) => [p[0] + (r[0] - p[0]) * t, p[1] + (r[1] - p[1]) * t];
    return [mix(a, d, k), mix(b, c, k), mix(c, b, k), mix(d, a, k)];
  };
  const aabb = (q) => {
    const xs = q.map((p) => p[0]), ys = q.map((p) => p[1]);
    return { left: Math.min(...xs), right: Math.max(...xs), top: Math.min(...ys), bottom: Math.max(...ys) };
  };
  // how deep two convex quads overlap (separating axes): 0 when apart
  const depth = (p, q) => {
    let least = Infinity;
    for (const poly of [p, q]) {
      for (let i = 0; i < 4; i++) {
        const [x1, y1] = poly[i], [x2, y2] = poly[(i + 1) % 4];
        let nx = y1 - y2, ny = x2 - x1;
        const len = Math.hypot(nx, ny) || 1;
        nx /= len; ny /= len;
        const proj = (poly2) => poly2.map(([x, y]) => x * nx + y * ny);
        const a = proj(p), b = proj(q);
        const o = Math.min(Math.max(...a), Math.max(...b)) - Math.max(Math.min(...a), Math.min(...b));
        if (o <= 0) return 0;
        least = Math.min(least, o);
      }
    }
    return least;
  };
  const overlaps = (items, where) => {
    let n = 0;
    for (let i = 0; i < items.length; i++) {
      const a = items[i];
      for (let j = i + 1; j < items.length; j++) {
        const b = items[j];
        if (a.box.right < b.box.left || b.box.right < a.box.left ||
            a.box.bottom < b.box.top || b.box.bottom < a.box.top) continue;
        if (depth(inked(a.quad), inked(b.quad)) > 2) {
          if (n++ < 3) say("overlap", where, `${short(a.text)} and ${short(b.text)}`);
        }
      }
    }
  };
  const offScreen = (box) => box.top < topEdge - 1 || box.bottom > innerHeight + 1 ||
    box.left < -1 || box.right > innerWidth + 1;
  let texts = 0, nfigs = 0;
  for (const root of roots) {
    // ---- plotly figures shown (a figure drawn ahead for a later step waits hidden in its slot)
    const figs = [...root.querySelectorAll(".js-plotly-plot")].filter((f) => vis(f) && f._fullLayout &&
      !(f.closest(".kvs-figslot") && f.dataset.key !== f.closest(".kvs-figslot").dataset.shown));
    for (const f of figs) {
      nfigs++;
      const fl = f._fullLayout;
      const name = short((fl.title && fl.title.text) ||
        f.closest("[aria-label]")?.getAttribute("aria-label") || "chart");
      const svg = f.querySelector(".main-svg");
      const edge = svg.getBoundingClientRect();
      const items = [];
      for (const t of f.querySelectorAll(".main-svg text")) {
        const s = t.textContent.trim();
        if (!s || !vis(t) || t.closest(".modebar")) continue;
        const quad = quadOf(t);
        if (!quad) continue;
        const box = aabb(quad);
        const m = t.getScreenCTM();
        const px = parseFloat(getComputedStyle(t).fontSize) * (m ? Math.hypot(m.a, m.b) : 1);
        texts++;
        if (px < minPx - 0.05) say("small", name, `${short(s)} at ${px.toFixed(1)} px`);
        if (box.left < edge.left - 1 || box.right > edge.right + 1 ||
            box.top < edge.top - 1 || box.bottom > edge.bottom + 1) {
          say("cut", name, short(s));
        }
        if (opts.screen && offScreen(box)) say("off screen", name, short(s));
        // a tick label's group names its axis (g.ytick, g.x2tick): the labels of one axis stacked
        const tickOf = /^[xy]\d*tick$/.exec(t.parentElement?.getAttribute("class") || "");
        // (slanted labels are set close on purpose: their ink is checked, as every text's, above)
        const upright = !m || Math.abs(m.b) < 0.01;
        items.push({ text: s, quad, box, note: !!t.closest(".annotation"), axis: upright && tickOf && tickOf[0] });
      }
      overlaps(items, name);
      // one axis's labels by their whole line boxes (not only the ink): labels that touch read as one
      // number (0,250,5 on a squeezed probability axis)
      const axes = {};
      for (const it of items) if (it.axis) (axes[it.axis] = axes[it.axis] || []).push(it);
      for (const [axis, ticks] of Object.entries(axes)) {
        let n = 0;
        for (let i = 0; i < ticks.length; i++) {
          for (let j = i + 1; j < ticks.length; j++) {
            if (depth(ticks[i].quad, ticks[j].quad) > 1 && n++ < 3) {
              say("crowded", name, `${axis} labels ${short(ticks[i].text)} and ${short(ticks[j].text)} touch`);
            }
          }
        }
      }
      // annotations over bars
      const bars = [...f.querySelectorAll(".barlayer .point path")].filter(vis).map((p) => p.getBoundingClientRect())
        .filter((r) => r.width > 1 && r.height > 1);
      for (const it of items.filter((x) => x.note)) {
        if (bars.some((r) => Math.min(r.bottom, it.box.bottom) - Math.max(r.top, it.box.top) > 2 &&
            Math.min(r.right, it.box.right) - Math.max(r.left, it.box.left) > 2)) say("on bars", name, short(it.text));
      }
      // subplots, category rows, heatmap cells, colour bars
      for (const k of Object.keys(fl)) {
        if (!/^yaxis\d*$/.test(k)) continue;
        const ax = fl[k];
        if (!ax || ax.visible === false || !ax._length) continue;
        if (ax._length < minPlot) say("squashed", name, `${k} plot ${Math.round(ax._length)} px high`);
        // a raster (layout.meta.raster: many rows read as one image, e.g. 192 key channels, labelled
        // every few rows) is exempt from the row checks, not from the others
        const raster = !!(fl.meta && fl.meta.raster);
        if (!raster && ax.type === "category" && ax.showticklabels !== false && ax._categories?.length) {
          const [lo, hi] = [Math.min(...ax.range), Math.max(...ax.range)];
          const rows = ax._categories.filter((_, i) => i >= lo && i <= hi).length;
          const id = "y" + k.slice(5);
          const shown = [...f.querySelectorAll(`g.${id}tick text`)]
            .filter((t) => t.textContent.trim() && vis(t)).length;
          if (shown < rows) say("squashed", name, `${k} labels ${shown} of ${rows} rows`);
        }
      }
      for (const tr of f._fullData || []) {
        if (tr.type !== "heatmap" || !tr.visible || (fl.meta && fl.meta.raster)) continue;
        const ya = fl["yaxis" + (tr.yaxis || "y").slice(1)];
        const rows = Array.isArray(tr.z) ? tr.z.length : 0;
        if (!ya || !rows) continue;
        const span = Array.isArray(ya.range) ? Math.abs(ya.range[1] - ya.range[0]) : rows;
        const cell = ya._length / Math.max(1, Math.min(rows, span)) - (tr.ygap || 0);
        const size = (tr.textfont && tr.textfont.size) || (fl.font && fl.font.size) || 12;
        const need = tr.texttemplate ? 1.15 * size : 8;      // its values, else a cell one can see
        if (cell < need) say("squashed", name, `heatmap cells ${cell.toFixed(1)} px high`);
      }
      for (const cb of f.querySelectorAll(".colorbar .cbfills")) {
        const h = cb.getBoundingClientRect().height;
        if (vis(cb) && h > 0 && h < 60) say("squashed", name, `colour bar ${Math.round(h)} px`);
      }
      if (opts.screen && offScreen(edge)) say("off screen", name, "the chart");
    }
    // ---- HTML text (everything outside the figures' SVG)
    if (opts.html === false) continue;
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    const items = [];
    const range = document.createRange();
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      const s = n.textContent.trim();
      const el = n.parentElement;
      if (!s || !el || el.closest("svg") || el.closest("script, style, option, select") || !vis(el)) continue;
      range.selectNodeContents(n);
      const rs = [...range.getClientRects()].filter((r) => r.width > 0.5 && r.height > 0.5);
      if (!rs.length) continue;
      const px = parseFloat(getComputedStyle(el).fontSize);
      texts++;
      const where = short(el.closest("[class]")?.className || el.tagName);
      if (px < minText - 0.05) say("small", where, `${short(s)} at ${px.toFixed(1)} px`);
      for (const r of rs) items.push({ text: s, quad: rectQuad(r), box: r, el });
      if (opts.screen && el.closest(".kvs-strip, .kvs-cachetbl, .kvs-cache .kvs-ttl") && rs.some(offScreen)) {
        say("off screen", where, short(s));
      }
    }
    overlaps(items, "page text");
  }
  const main = document.querySelector("[data-testid='stMain']");
  const strips = roots.reduce((n, r) => n + [...r.querySelectorAll(".kvs-strip")].filter(vis).length, 0);
  const wide = Math.max(document.documentElement.scrollWidth,
                        main ? main.scrollWidth - main.clientWidth + innerWidth : 0);
  return { problems, texts, figs: nfigs, strips, sideways: wide > innerWidth };
}"""


# ``AFTER_STEP([step, opts])``: waits until the stepper has fitted event ``step`` (kvviz/ui/step_view.js
# sets data-fitted), then scans: one round trip per event of a walk
AFTER_STEP = """async ([step, opts]) => {
  const t0 = performance.now();
  const frame = () => new Promise((ok) => requestAnimationFrame(() => ok()));
  const root = () => document.querySelector('.kvs-root');
  // the step fitted, and still so two frames later (a stepper fits itself again when it grew: step_view.js)
  for (;;) {
    if (performance.now() - t0 > 30000) {
      return { problems: [`event ${step} was not drawn and fitted within 30 s`], strips: 1, figs: 1 };
    }
    if (root()?.dataset.fitted === String(step)) {
      await frame(); await frame();
      if (root()?.dataset.fitted === String(step)) break;
    }
    await new Promise((ok) => setTimeout(ok, 20));
  }
  const r = (""" + SCAN + """)(opts);
  if (r.problems.some((p) => p.startsWith("off screen"))) {   // how far the fit was from the screen
    const b = root().getBoundingClientRect();
    const scale = getComputedStyle(root()).getPropertyValue("--kvs-scale") || 1;
    r.problems.push(`off screen: the step at top ${Math.round(b.top)} px, fit left ${root().dataset.over} px over, ` +
                    `window ${innerWidth}x${innerHeight}, scale ${scale}`);
  }
  return r;
}"""
