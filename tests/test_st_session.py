"""The browser-free session client (tools/st_session.py): first on scripted server messages (no
server, so these are engine-speed tests), then once against a real ``streamlit run``."""
import re

import pytest
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.Slider_pb2 import Slider

from tools.st_session import ProtocolError, Session, run, visit

NEXT_ID = "$$ID-0f1e-kv_step_next"


class ScriptedSocket:
    """Stands in for the websocket: each BackMsg sent releases the next batch of ForwardMsgs."""

    def __init__(self, *batches: list[ForwardMsg]):
        self.batches, self.pending, self.sent = list(batches), [], []

    async def send(self, data: bytes) -> None:
        msg = BackMsg()
        msg.ParseFromString(data)
        self.sent.append(msg)
        self.pending += [m.SerializeToString() for m in self.batches.pop(0)]

    async def recv(self) -> bytes:
        return self.pending.pop(0)


def new_session(run_id: str, fragments=(), session_id: str = "sess-1") -> ForwardMsg:
    m = ForwardMsg()
    m.metadata.run.script_run_id = run_id
    m.metadata.run.fragment_ids.extend(fragments)
    m.new_session.initialize.session_id = session_id
    return m


def element(path, fragment="", **fill) -> ForwardMsg:
    """A delta drawing one element at ``path``, e.g. element([0, 1], heading={"body": "x"})."""
    m = ForwardMsg()
    m.metadata.delta_path.extend(path)
    m.delta.fragment_id = fragment
    (kind, fields), = fill.items()
    for k, v in fields.items():
        setattr(getattr(m.delta.new_element, kind), k, v)
    return m


def finished(run_id: str, status=ForwardMsg.FINISHED_SUCCESSFULLY) -> ForwardMsg:
    m = ForwardMsg()
    m.metadata.run.script_run_id = run_id
    m.script_finished = status
    return m


def page_info(query: str) -> ForwardMsg:
    m = ForwardMsg()
    m.page_info_changed.query_string = query
    return m


def scripted(*batches) -> tuple[Session, ScriptedSocket]:
    s = Session("http://unused", "ABC_miniature", "step=0", timeout=5)
    s.query_string, s._ws = s.query, ScriptedSocket(*batches)
    return s, s._ws


def first_load() -> list[ForwardMsg]:
    return [new_session("r1"),
            element([0, 0], heading={"body": "A/B/C miniature"}),
            element([0, 1, 0], "frag", button={"id": NEXT_ID, "label": "Next"}),
            element([0, 1, 1], "frag", heading={"body": "Event 0 of 3: prefill"}),
            element([0, 1, 2], "frag", markdown={"body": "the chosen token"}),
            element([1, 0], number_input={"id": "$$ID-77-new", "label": "New tokens"}),
            element([1, 1], slider={"id": "$$ID-88-sweep", "label": "Largest N", "type": Slider.Type.SELECT_SLIDER}),
            finished("r1")]


def test_first_load_collects_the_page_in_order_with_its_session_id():
    s, ws = scripted(first_load())
    run(s.rerun())
    sent = ws.sent[0].rerun_script
    assert (sent.query_string, sent.page_name, sent.fragment_id) == ("step=0", "ABC_miniature", "")
    assert s.session_id == "sess-1" and s.runs == 1
    assert s.headings() == ["A/B/C miniature", "Event 0 of 3: prefill"]
    assert [(w.key, w.kind, w.fragment_id) for w in s.widgets()] == [("kv_step_next", "button", "frag"),
                                                                     ("new", "number_input", ""),
                                                                     ("sweep", "slider", "")]
    assert s.widget("Next").id == NEXT_ID and not s.exceptions()


def test_a_click_is_a_trigger_in_its_fragment_and_the_fragment_run_replaces_only_its_part():
    step = [new_session("r2", ["frag"], session_id=""),        # later runs repeat no session id
            element([0, 1, 0], "frag", button={"id": NEXT_ID, "label": "Next"}),
            element([0, 1, 1], "frag", heading={"body": "Event 1 of 3: choose"}),
            page_info("step=1"),
            finished("r2", ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY)]
    s, ws = scripted(first_load(), step)
    run(s.rerun())
    run(s.click("kv_step_next"))
    sent = ws.sent[1].rerun_script
    assert sent.fragment_id == "frag" and sent.query_string == "step=0"
    assert [(w.id, w.trigger_value) for w in sent.widget_states.widgets] == [(NEXT_ID, True)]
    # the title outside the fragment stays; the fragment's markdown that was not drawn again goes
    assert s.headings() == ["A/B/C miniature", "Event 1 of 3: choose"]
    assert s.markdown() == [] and s.query_string == "step=1" and s.session_id == "sess-1"


@pytest.mark.parametrize("key,value,field,sent", [("new", 5, "double_value", 5.0),
                                                   ("Largest N", 16, "string_array_value", ["16"])])
def test_a_value_travels_in_its_widgets_field(key, value, field, sent):
    """A number input sends a double; a select_slider the label of its option."""
    s, ws = scripted(first_load(), [new_session("r2"), finished("r2")])
    run(s.rerun())
    wid = s.widget(key).id
    run(s.set(key, value))
    w, = ws.sent[1].rerun_script.widget_states.widgets
    got = getattr(w, field)
    assert (w.id, w.WhichOneof("value")) == (wid, field)
    assert (list(got.data) if field.endswith("array_value") else got) == sent


def test_a_run_cut_short_by_a_rerun_is_not_the_end_and_an_exception_is_reported():
    s, _ = scripted([new_session("r1"), element([0, 0], heading={"body": "half"}),
                     finished("r1", ForwardMsg.FINISHED_EARLY_FOR_RERUN),
                     new_session("r2"), element([0, 1], exception={"type": "ZeroDivisionError",
                                                                   "message": "division by zero"}),
                     finished("r2")])
    run(s.rerun())
    assert s.runs == 1 and s.exceptions() == ["ZeroDivisionError: division by zero"]
    assert s.headings() == []                 # drawn by the abandoned run, gone at the end of the next


def test_an_unknown_page_is_an_error_not_an_empty_page():
    m = ForwardMsg()
    m.page_not_found.page_name = "Nope"
    s, _ = scripted([new_session("r1"), m, finished("r1")])
    with pytest.raises(ProtocolError, match="page not found"):
        run(s.rerun())


@pytest.mark.app
def test_against_a_real_server_a_deep_link_and_a_step_report(server):
    def heading(s):
        data = s.stepper()
        return data["payload"]["frames"][data["start"]]["heading"]

    async def scenario():
        async with Session(server, "ABC_miniature", "prompt=C+A+B&new=4&step=2") as s:
            opened = (s.session_id, heading(s), s.query_string)
            assert {c.component_name for c in s.components()} >= {"kvviz_stepper"}
            await s.set("kvs_abc", {"step": 3})           # what the browser sends after drawing step 3
            return opened, s
    (sid, first, _), s = run(scenario())
    assert re.fullmatch(r"[0-9a-f-]{36}", sid) and first.startswith("Event 2 of 7")
    assert "step=3" in s.query_string
    assert s.headings()[0] == "A/B/C miniature" and not s.exceptions()
    other = run(visit(server, "Weather_heads"))            # a second visitor: its own session
    assert other.session_id != sid and heading(other).startswith("Event 0 of")
