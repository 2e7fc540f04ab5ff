"""A Streamlit session without a browser: Streamlit's own websocket protocol.

One ``Session`` is one visitor: it connects to ``ws://HOST/_stcore/stream`` (subprotocol
``streamlit``), asks for a page with ``BackMsg(rerun_script=ClientState(query_string, page_name))``
and reads ``ForwardMsg``s until the run's ``script_finished``, keeping what the page drew by delta
path, as the browser's element tree does. A follow-up rerun carries widget changes the way the
browser sends them (a button press is a trigger value on the button's widget id, sent with the id
of the fragment the button lives in), so a test can press Next without a browser::

    async with Session("http://127.0.0.1:8501", "ABC_miniature", "step=4") as s:
        assert not s.exceptions() and s.headings()[-1].startswith("Event 4 of")
        await s.click("kv_step_next")             # a widget's key (or its id, or its label)
        await s.set("new", 5)                     # number inputs, sliders, text, toggles, selects

``run(coro)`` runs a coroutine for synchronous callers (tests); many sessions at once are plain
asyncio tasks (``asyncio.gather``), as in tests/test_many_visitors.py and bench/room.py.
``Connection`` is the rest of a visitor: a browser's keep-alive HTTP GET for the page's files
(bench/room.py --assets, tests/test_replicas.py).
"""
from __future__ import annotations

import asyncio
import collections
import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ClientState_pb2 import ClientState
from streamlit.proto.Element_pb2 import Element
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState
from websockets.asyncio.client import connect

DONE = {ForwardMsg.FINISHED_SUCCESSFULLY, ForwardMsg.FINISHED_WITH_COMPILE_ERROR,
        ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY}      # not FINISHED_EARLY_FOR_RERUN
# element kind -> the WidgetState field its value travels in (Streamlit's register_widget value_type)
VALUE_FIELD = {"button": "trigger_value", "download_button": "trigger_value", "checkbox": "bool_value",
               "slider": "double_array_value", "number_input": "double_value", "text_input": "string_value",
               "text_area": "string_value", "selectbox": "string_value", "radio": "string_value",
               "color_picker": "string_value", "multiselect": "string_array_value",
               "button_group": "string_array_value"}     # a select_slider: a slider sending option labels


class ProtocolError(RuntimeError):
    """The server answered something a browser would not accept (no such page, a cached reference)."""


@dataclass
class Drawn:
    """One element or block the page drew, with the run and fragment that drew it."""
    proto: Any                   # streamlit.proto Element or Block
    run_id: str
    fragment_id: str

    @property
    def kind(self) -> str:
        return self.proto.WhichOneof("type") or ""


@dataclass
class Widget:
    kind: str
    id: str
    key: str | None              # the ``key=`` the page gave it (Streamlit appends it to the id)
    label: str
    proto: Any
    fragment_id: str


@dataclass
class Session:
    """One visitor's session on a running ``streamlit run`` (``base_url`` as ``http://host:port``)."""
    base_url: str
    page: str = ""               # the URL path without its slash ("" is the home page)
    query: str = ""              # the query string without "?"
    timeout: float = 120.0
    session_id: str = ""         # from the server's new_session.initialize
    # the query string as the server last sent it (page_info_changed), sent with every rerun; a
    # browser also writes bound widgets' values into its address itself, which this client does not
    query_string: str = ""
    drawn: dict[tuple[int, ...], Drawn] = field(default_factory=dict, repr=False)
    runs: int = 0                # script runs finished (full or fragment)
    timings: dict[str, float] = field(default_factory=dict, repr=False)   # perf_counter of the first load's milestones
    headers: dict[str, str] = field(default_factory=dict, repr=False)     # sent with the handshake (a cookie)
    response_headers: dict[str, str] = field(default_factory=dict, repr=False)   # the handshake's answer
    _ws: Any = field(default=None, repr=False)
    _run_id: str = field(default="", repr=False)
    _run_fragments: tuple[str, ...] = field(default=(), repr=False)

    # ------------------------------------------------------------------ connection
    async def __aenter__(self) -> Session:
        await self.open()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def open(self) -> Session:
        """Connect and run the page once (the first visit of a deep link)."""
        self.timings["start"] = time.perf_counter()
        url = "ws" + self.base_url.removeprefix("http") + "/_stcore/stream"
        self._ws = await connect(url, subprotocols=["streamlit"], max_size=None, ping_interval=None,
                                 open_timeout=self.timeout, close_timeout=2, additional_headers=self.headers or None)
        self.response_headers = dict(self._ws.response.headers)
        self.timings["connected"] = time.perf_counter()
        self.query_string = self.query
        await self.rerun()
        self.timings["finished"] = time.perf_counter()
        return self

    async def close(self) -> None:
        if self._ws is not None:
            await self._ws.close()
            self._ws = None

    # ------------------------------------------------------------------ reruns
    async def rerun(self, widgets: list[WidgetState] = (), fragment_id: str = "") -> None:
        """Send one rerun request (with these widget states) and wait until its run has finished."""
        state = ClientState(query_string=self.query_string, page_name=self.page, fragment_id=fragment_id)
        state.widget_states.widgets.extend(widgets)
        await self._ws.send(BackMsg(rerun_script=state).SerializeToString())
        await asyncio.wait_for(self._until_finished(), self.timeout)

    async def click(self, key: str) -> None:
        """Press a button (as a pointer click does: a trigger value for one run)."""
        await self.set(key, True)

    async def set(self, key: str, value: Any) -> None:
        """Change one widget (found by key, id or label) to ``value`` and wait for the rerun. Only
        the changed widget is sent (a browser sends them all); the server keeps the others' values."""
        w = self.widget(key)
        state = WidgetState(id=w.id)
        if w.kind == "bidi_component":           # a v2 component's state: a JSON object (setStateValue)
            state.json_value = json.dumps(value)
            await self.rerun([state], fragment_id=w.fragment_id)
            return
        slot = VALUE_FIELD.get(w.kind)
        values = list(value) if isinstance(value, (list, tuple)) else [value]
        if w.kind == "slider" and w.proto.type == w.proto.Type.SELECT_SLIDER:
            slot, values = "string_array_value", [str(v) for v in values]
        if slot is None:
            raise ProtocolError(f"no value encoding for a {w.kind} widget ({key!r})")
        if slot.endswith("array_value"):
            getattr(state, slot).data.extend(values)
        else:
            setattr(state, slot, value)
        await self.rerun([state], fragment_id=w.fragment_id)

    async def _until_finished(self) -> None:
        while True:
            msg = ForwardMsg()
            msg.ParseFromString(await self._ws.recv())
            kind = msg.WhichOneof("type")
            if kind == "new_session":
                self._run_id = msg.metadata.run.script_run_id
                self._run_fragments = tuple(msg.metadata.run.fragment_ids)
                if msg.new_session.initialize.session_id:
                    self.session_id = msg.new_session.initialize.session_id
            elif kind == "delta":
                self.timings.setdefault("first_delta", time.perf_counter())
                d = msg.delta
                part = d.WhichOneof("type")
                if part in ("new_element", "add_block"):
                    self.drawn[tuple(msg.metadata.delta_path)] = Drawn(getattr(d, part), self._run_id, d.fragment_id)
            elif kind == "page_info_changed":
                self.query_string = msg.page_info_changed.query_string
            elif kind == "page_not_found":
                raise ProtocolError(f"page not found: {self.page!r}")
            elif kind == "ref_hash":        # only sent for hashes the client says it has cached; we never do
                raise ProtocolError("the server sent a cached-message reference")
            elif kind == "script_finished" and msg.script_finished in DONE:
                if msg.metadata.run.script_run_id in ("", self._run_id):
                    self._drop_stale()
                    self.runs += 1
                    return

    def _drop_stale(self) -> None:
        """What the browser does at the end of a run: elements this run did not draw again go away
        (for a fragment run, only those inside its fragments)."""
        fragments = self._run_fragments
        for path, d in list(self.drawn.items()):
            if d.run_id != self._run_id and (not fragments or d.fragment_id in fragments):
                del self.drawn[path]

    # ------------------------------------------------------------------ what the page shows
    def elements(self, kind: str | None = None) -> list[Any]:
        """Element protos in page order (main area, then sidebar), optionally of one kind."""
        return [getattr(d.proto, d.kind) for _, d in sorted(self.drawn.items())
                if isinstance(d.proto, Element) and (kind is None or d.kind == kind)]

    def headings(self) -> list[str]:
        return [h.body for h in self.elements("heading")]

    def markdown(self) -> list[str]:
        return [m.body for m in self.elements("markdown")]

    def alerts(self) -> list[str]:
        """st.error / warning / info / success bodies (the address notices are warnings)."""
        return [a.body for a in self.elements("alert")]

    def exceptions(self) -> list[str]:
        return [f"{e.type}: {e.message}" for e in self.elements("exception")]

    def plotly_specs(self) -> list[dict]:
        """The figures of the page's single charts (kvviz/ui/components/charts.py's component)."""
        return [json.loads(c.json)["fig"] for c in self.elements("bidi_component")
                if c.component_name == "kvviz_chart"]

    def stepper(self) -> dict | None:
        """The stepper's mount data with its payload parsed (as tests/conftest.py's ``stepper``)."""
        for c in self.elements("bidi_component"):
            if c.component_name == "kvviz_stepper":
                data = json.loads(c.json)
                data["payload"] = json.loads(data["payload"])
                return data
        return None

    def components(self) -> list[Any]:
        """Custom components (v1 ``component_instance`` and v2 ``bidi_component`` protos)."""
        return self.elements("component_instance") + self.elements("bidi_component")

    def widgets(self) -> list[Widget]:
        out = []
        for _, d in sorted(self.drawn.items()):
            inner = getattr(d.proto, d.kind, None) if isinstance(d.proto, Element) else None
            wid = getattr(inner, "id", "") if inner is not None and hasattr(inner, "id") else ""
            if wid.startswith("$$ID-"):
                key = wid.split("-", 2)[2]
                out.append(Widget(d.kind, wid, None if key == "None" else key, getattr(inner, "label", ""),
                                  inner, d.fragment_id))
        return out

    def widget(self, key: str) -> Widget:
        """The widget with this key, id or label."""
        for w in self.widgets():
            if key in (w.key, w.id, w.label):
                return w
        raise KeyError(f"no widget {key!r} on {self.page or 'the home page'}; "
                       f"keys: {[w.key or w.label for w in self.widgets()]}")


def run(coro):
    """Run a coroutine to completion from synchronous code (a test, a script), on an event loop in a
    thread of its own: it also works where this thread has a loop running already (Playwright's
    sync API keeps one in pytest's thread once a browser test has run). A session belongs to the
    loop that opened it: open, click and read it inside one coroutine."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


async def visit(base_url: str, page: str = "", query: str = "", timeout: float = 120.0) -> Session:
    """Open a page once and disconnect: the session keeps what the page drew."""
    async with Session(base_url, page, query, timeout) as s:
        return s


class Connection:
    """One keep-alive HTTP/1.1 connection, as a browser holds it: GET, gzip accepted."""

    def __init__(self, base: str):
        u = urlsplit(base)
        self.host, self.port, self.netloc = u.hostname, u.port or 80, u.netloc
        self.reader = self.writer = None

    async def get(self, path: str, cookie: str = "") -> tuple[int, dict[str, list[str]], bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        head = (f"GET {path} HTTP/1.1\r\nHost: {self.netloc}\r\nAccept-Encoding: gzip\r\nAccept: */*\r\n"
                f"User-Agent: kvviz-bench\r\n" + (f"Cookie: {cookie}\r\n" if cookie else "") + "\r\n")
        self.writer.write(head.encode("latin-1"))
        await self.writer.drain()
        status_line = (await self.reader.readline()).decode("latin-1")
        headers: dict[str, list[str]] = collections.defaultdict(list)
        while (line := (await self.reader.readline()).decode("latin-1").rstrip("\r\n")):
            k, _, v = line.partition(":")
            headers[k.strip().lower()].append(v.strip())
        if "chunked" in ",".join(headers.get("transfer-encoding", [])):
            body = b""
            while (size := int((await self.reader.readline()).split(b";")[0], 16)):
                body += await self.reader.readexactly(size)
                await self.reader.readline()
            await self.reader.readline()
        elif "content-length" in headers:
            body = await self.reader.readexactly(int(headers["content-length"][0]))
        else:
            body = await self.reader.read()
        if "close" in ",".join(headers.get("connection", [])):
            await self.close()
        return int(status_line.split()[1]), headers, body

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
