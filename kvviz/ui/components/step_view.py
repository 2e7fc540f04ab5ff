"""The stepper: one component that receives a run's prepared frames once and draws every step in the
browser, so a step press costs no server round trip.

Every stepping page (A/B/C, weather, tiny GPT, the Cost page's Batching tab) uses it the same way:

1. **Build the payload** with pure functions (``kvviz/ui/frames/``): a ``Payload`` collects one
   frame per event from the engine's records (heading, token strip, sentences, figure references,
   metrics, the cache-table rows); figures are the pure builders of ``kvviz/viz/`` as plotly
   JSON (their ``*_spec`` twins, or any ``go.Figure``), stored once however many frames show them,
   and so are long texts and cache rows. See the format in ``kvviz/ui/frames/__init__.py``;
   ``kvviz/ui/frames/abc.py`` is the smallest example, a page over a ``Run`` looks like::

       from kvviz.ui.frames import Payload, counters, lines_block, moments, strip_block
       from kvviz.ui.frames.steps import (attention_blocks, cache_frame_table, logits_blocks,
                                          next_choice, run_notice, source)

       def build(run, tr) -> Payload:                   # tr: translator(lang), like i18n.t
           pl = Payload(tr, ratio=(1, 1), csv="mypage")  # column widths; CSV file stem
           for ev in run.events:
               src = source(run, ev)                      # a choose event shows the pass before it
               pl.add(tr("mypage.event_heading", i=ev.index, last=len(run.events) - 1, phase=ev.phase),
                      top=[strip_block(ev.sequence, len(run.prompt), ev.cache_len),
                           lines_block(did_text, not_yet_text)],
                      main=attention_blocks(pl, ev, src, tr),
                      side=logits_blocks(pl, ev, logit_tokens, next_choice(run, ev), tr),
                      metrics=counters(ev, tr), table=cache_frame_table(pl, ev, tr),
                      notice=run_notice(run, ev, tr))     # what to notice (docs/adding-a-page.md)
           moments.run(pl, run, tr)                       # key moments: ticks on the slider, key M
           return pl

   Blocks that only explain (``explain=True``) are left out in presenter mode; ``lead`` holds a
   figure too wide for a column (it sits beside ``side`` in presenter mode).
2. **Cache it** per run + language + view options with ``st.cache_resource`` as a JSON string
   (read-only, never mutated)::

       @st.cache_resource(max_entries=64, ttl=3600, show_spinner=False)
       def _payload(prompt, new, rule, seed, lang) -> str:
           return frames_abc.build(cached_run(...), translator(lang)).to_json()

3. **Mount it** with ``page_stepper``, the one fragment every page's stepper runs in (a step, a
   layer or a head then reruns only it), with a ``LayerHeadPicker`` when the frames depend on one::

       step_view.url_step_notice(n_events)           # page body: a bad ?step= gets a notice
       step_view.page_stepper("abc.step", payload, n_events, key="kvs_abc", run_id=repr(key))

In the browser the component draws event i (plotly.js ``react`` on the prepared figures, tables as
HTML), with Prev / Next / Reset / End buttons and keys (← → Home End), an event slider and autoplay
(Play / Pause, Space, a speed in events per second; it stops at the last event). Each frame's "what
to notice" line comes first under the controls (in presenter mode instead of the ✓ / ⌛ lines), with a
button to the event it names; the payload's key moments are ticks under the slider, and key M (or
the *Key moment* button) jumps to the next one. Where the address is a screen of the lecture script
(kvviz/ui/app/pages.py ``matching``; ``lecture_places`` below), the event that screen shows says its
place and links the script's next screen. It writes
``?step=i`` into the address once the press's frame is painted (``history.replaceState``, other
parameters kept; 120 ms later, so that presses in a row write it once, and never inside a press: it
cost 11-21 ms of one on a long page, docs/measured-gemma3.md) and reports the step to Python 250 ms
after the last press or autoplay tick (``setStateValue``; the address first): the fragment
then reruns cheaply (the payload text is reused), ``st.session_state["step"]`` learns the step and
the server's copy of the address follows. ``?step=3`` opens event 3, also on a fresh server's first
visit; a step out of range falls back to event 0 with a notice.

A payload with a ``pick`` grid (``Payload.pick_fig`` / ``set_pick``: small multiples such as the tiny
GPT's model view) makes its tiles buttons (click, or Tab into the grid, arrows, Enter): the choice
travels as the trigger ``pick`` = [row, col] to ``on_pick(row, col)``, which sets the page's view
settings; the fragment's rerun then mounts the payload for that view (the step shown is kept). A
click costs one payload build (cached per view) and one transfer: the alternative, every view's
frames in one payload, would multiply what each first visit loads by rows × cols.

Plotly.js comes from ``kvviz/ui/components/plotly_js.py`` (kvviz's partial bundle in ``static/``, loaded once per
browser tab, shared with the single charts of ``kvviz/ui/components/charts.py``).
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import streamlit as st

from kvviz.ui.app import nav, presenter, urlstate
from kvviz.ui.app.i18n import current_lang, t
from kvviz.ui.app.links import deep_link
from kvviz.ui.app.pages import BY_TITLE, PAGE, matching
from kvviz.ui.app.perf import timing
from kvviz.ui.components import plotly_js
from kvviz.ui.components.picker import LayerHeadPicker

# a run's frames for a layer and head (0-based) in a language: a cached function, or one fixed text
Frames = Callable[[int, int, str], str] | str

STEP_KEY = "step"            # the step Python knows (plain session state; cleared on page switch)
_HERE = Path(__file__).parent
_LAST = "_kvs_last_data"     # per component key: the data mounted last (reused by a step report)
_REPORTED = "_kvs_reported"
_ANY = "*"                   # _REPORTED for whichever stepper the page has
WHOLE = "_kvs_whole"         # this tab's session has drawn a stepper: pages run whole from now on
_WHOLE_NOW = "_kvs_whole_now"    # set by the drawing's report: the fragment's rerun reruns the page
REST_KEY = "kvs_rest"        # the placeholder button for the rest of a page (the stepper looks for it)


_component = st.components.v2.component(
    "kvviz_stepper", js=plotly_js.module_js(_HERE / "step_view.js"),
    css=(_HERE / "step_view.css").read_text(encoding="utf-8"),
    isolate_styles=False)      # in the page's own DOM: Streamlit's fonts, plotly's global styles, tests' selectors


def _url_step(n_events: int) -> int:
    raw = st.query_params.get(STEP_KEY)
    try:
        step = int(raw) if raw is not None else 0
    except ValueError:
        return 0
    return step if 0 <= step < n_events else 0


def url_step_notice(n_events: int) -> None:
    """Tell the user when ?step= in the address was malformed or out of range (event 0 is shown)."""
    raw = st.query_params.get(STEP_KEY)
    if raw is None:
        return
    try:
        ok = 0 <= int(raw) < n_events
    except ValueError:
        ok = False
    if not ok:
        urlstate.notice(t("stepper.bad_step", raw=raw[:40], last=n_events - 1))


def current_step(n_events: int) -> int:
    """The step this session shows: from the address on a new session (or after a page switch),
    then what the component reported; kept inside the run."""
    if STEP_KEY not in st.session_state:
        st.session_state[STEP_KEY] = _url_step(n_events)
    step = min(max(0, int(st.session_state[STEP_KEY])), n_events - 1)
    st.session_state[STEP_KEY] = step
    return step


def _reported(key: str, n_events: int) -> None:
    """The component's debounced step report: remember it, and keep the server's copy of the
    address in step (Streamlit sends the whole query string back when any parameter changes)."""
    value = (st.session_state.get(key) or {}).get("step")
    try:
        step = min(max(0, int(value)), n_events - 1)
    except (TypeError, ValueError):
        return
    st.session_state[STEP_KEY] = step
    st.session_state[_REPORTED] = key
    if step:
        st.query_params[STEP_KEY] = str(step)
    else:
        st.query_params.pop(STEP_KEY, None)


def _picked(key: str, on_pick: Callable[[int, int], None]) -> None:
    """A tile of the payload's pick grid was chosen: ``[row, col]`` as the trigger ``pick``."""
    value = (st.session_state.get(key) or {}).get("pick")
    try:
        row, col = (int(v) for v in value)
    except (TypeError, ValueError):
        return                                  # not two whole numbers: nothing to choose
    on_pick(row, col)


def notice(text: str) -> None:
    """A view without a stepper: its "what to notice" line (the thing on screen that carries the
    view's point, and why), above what it points at, in the stepper's words."""
    st.info(f"**{t('notice.label')}:** {text}", icon=":material/visibility:")


def lecture_places(page_key: str | None) -> list[list]:
    """The screens of the lecture script this address shows that name a step (kvviz/ui/app/pages.py
    ``matching``): ``[step, "Lecture script, section 2: screen 8 of 53", next screen's address, its
    line]`` each, for the stepper (nav.place_text)."""
    if page_key not in PAGE:
        return []
    return [[p.step, nav.place_text(p),
             deep_link(nxt.page.script, nxt.screen.params) if nxt else "",
             t(f"lecture.{nxt.screen.key}") if nxt else ""]
            for p, nxt in matching(page_key, st.query_params.to_dict()) if p.step is not None]


def _page_key() -> str | None:
    """The key of the page this run draws (nav.page_setup records its title key)."""
    spec = BY_TITLE.get(st.session_state.get("_page"))
    return spec.key if spec else None


def _is_browser() -> bool:
    """A web browser runs this session (it will draw the stepper and say so); AppTest and scripted
    clients send no browser User-Agent and always get whole pages."""
    try:
        return "Mozilla/" in (st.context.headers.get("User-Agent") or "")
    except Exception:                          # noqa: BLE001 - no request context: not a browser
        return False


def _drawn(key: str) -> None:
    """The stepper drew its first event while the page waited for it: run the page whole."""
    st.session_state[_REPORTED] = key          # the fragment's rerun resends what the browser has
    if not st.session_state.get(WHOLE):
        st.session_state[WHOLE] = True
        st.session_state[_WHOLE_NOW] = True


def _show_rest() -> None:
    st.session_state[WHOLE] = True
    st.session_state[_REPORTED] = _ANY         # the stepper keeps what it shows (no redraw)


def whole_page() -> bool:
    """Whether the page goes on below its stepper in this run (call it right after the stepper).

    A browser's first page with a stepper stops here: on a fresh browser everything below it
    (sections, tables, metrics) shared the one busy main thread with the stepper's first drawing,
    about a second on the Paged cache page (bench/server_profile.py, README *Measured*). Once the
    stepper has drawn its first event it says so and the page runs again whole, as every page
    does for the rest of the tab's session. Meanwhile a button stands in for the rest (it shows it
    at once). Call it only where a rest follows (not in presenter mode on a page that shows
    nothing more there)."""
    if st.session_state.get(WHOLE) or not _is_browser():
        return True
    st.button(t("stepper.rest_loading"), key=REST_KEY, on_click=_show_rest, icon=":material/more_down:",
              type="tertiary", help=t("stepper.rest_loading_help"))
    return False


def stepper(payload: str, n_events: int, *, key: str, run_id: str,
            on_pick: Callable[[int, int], None] | None = None) -> int:
    """Mount the stepper (inside an ``@st.fragment``); returns the step Python knows.

    ``payload``: ``Payload.to_json()`` of the run (cache it). ``run_id``: identifies the run apart
    from view options (language, layer, head): while it stays the same the browser keeps the step it
    shows when the payload changes; a new run starts at the step Python knows. ``on_pick(row, col)``:
    a tile of the payload's pick grid was chosen (a callback: it runs before the fragment reruns;
    it must check the range itself).
    """
    if st.session_state.pop(_WHOLE_NOW, False):
        st.rerun(scope="app")                  # the first drawing's report: now the whole page
    step = current_step(n_events)
    last = st.session_state.get(_LAST, {}).get(key)
    if st.session_state.get(_REPORTED) in (key, _ANY) and last is not None and last["payload"] == payload:
        data = last      # the rerun of a step report: send exactly what the browser has (nothing redraws)
    else:
        data = {"payload": payload, "start": step, "run": run_id, "plotly": plotly_js.PLOTLY,
                "present": presenter.presenting(),
                "lecture": lecture_places(_page_key()),
                "fmt": st.session_state.get("chart_format") or "png"}
    st.session_state.pop(_REPORTED, None)
    st.session_state.setdefault(_LAST, {})[key] = data
    callbacks = {"on_pick_change": functools.partial(_picked, key, on_pick)} if on_pick else {}
    _component(key=key, data=data, on_step_change=functools.partial(_reported, key, n_events),
               on_drawn_change=functools.partial(_drawn, key), **callbacks)
    return step


@st.fragment
def page_stepper(timing_label: str, frames: Frames, n_events: int, *, key: str, run_id: str,
                 picker: LayerHeadPicker | None = None, pickable: bool = False,
                 after: Callable[[], None] | None = None) -> None:
    """A page's stepper, in its own fragment: the ``picker``'s layer and head (a view setting, folded
    away in presenter mode; none for a trivial one), then ``stepper`` over ``frames(layer, head,
    lang)``. ``pickable``: the payload's pick grid (the model view) chooses the picker's layer and
    head. ``after``: drawn below the stepper in the same fragment. ``timing_label``: its render
    time for bench/ (kvviz.ui.app.perf)."""
    with timing(timing_label):
        layer = head = 0
        if picker is not None and not picker.trivial:
            with presenter.settings("stepview.view"):
                layer, head = picker.show()
        payload = frames if isinstance(frames, str) else frames(layer, head, current_lang())
        stepper(payload, n_events, key=key, run_id=run_id, on_pick=picker.pick if pickable and picker else None)
        if after is not None:
            after()
