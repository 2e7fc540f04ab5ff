"""Many visitors at once, without a browser: 24 sessions on one ``streamlit run`` through Streamlit's
own websocket protocol (tools/st_session.py), spread over the A/B/C, weather and tiny GPT pages.
Each opens its own deep link (prompt, new tokens, ``?step=``), all loading together; a quarter of
them press Next while the others still load. Each must see exactly its own event and tokens, as
the engine computes them, and none may see an exception. (What only a browser shows, keys in two
tabs, is tests/browser/test_two_tabs.py.)"""
import asyncio
from urllib.parse import parse_qs, urlencode

import pytest

from kvviz.decoding.stepper import run_generation
from kvviz.models.registry import get_model
from tools.st_session import Session, run

pytestmark = pytest.mark.app

SESSIONS = 24
# (page path, prompt parameter, length parameter, model name, prompts)
PAGES = [
    ("ABC_miniature", "prompt", "new", "abc", ["A B", "C A B", "B", "A A C", "C C A B", "B A", "A C", "C"]),
    ("Weather_heads", "prompt", "new", "weather",
     ["Today weather is so", "Today weather is", "weather is so", "Today is so nice", "so nice",
      "Today weather", "is so", "Today"]),
    ("Tiny_GPT", "gpt_prompt", "gpt_new", "gpt",
     ["Today the weather is so", "It was", "Tomorrow the wind", "The sky is", "Yesterday it was", "In",
      "The weather", "Today"]),
]


def _plans():
    """Session i: page i % 3, that page's (i // 3)-th prompt, 3–7 new tokens, opened at event
    i % 5; every fourth session then presses Next 1–3 times."""
    for i in range(SESSIONS):
        path, p_key, n_key, model, prompts = PAGES[i % len(PAGES)]
        prompt, new, step = prompts[(i // len(PAGES)) % len(prompts)], 3 + i % 5, i % 5
        presses = 1 + (i // 4) % 3 if i % 4 == 3 else 0
        yield path, urlencode({p_key: prompt, n_key: new, "step": step}), model, prompt, new, step, presses


STEPPER_KEYS = {"ABC_miniature": "kvs_abc", "Weather_heads": "kvs_weather", "Tiny_GPT": "kvs_gpt"}


async def _visitor(server: str, path: str, query: str, presses: int, delay: float) -> Session:
    """Open the link; a visitor who presses Next sends the stepper's step reports, as the browser
    does after drawing each step itself."""
    await asyncio.sleep(delay)                       # all arrive within ≈ 1 s
    async with Session(server, path, query, timeout=300) as s:
        start = s.stepper()["start"]
        for i in range(presses):
            await s.set(STEPPER_KEYS[path], {"step": start + i + 1})
        return s


def test_two_dozen_sessions_each_see_their_own_run(server):
    plans = list(_plans())
    runs = []
    for _, _, model, prompt, new, _, _ in plans:
        m = get_model(model)
        runs.append(run_generation(m, m.tokenize(prompt) if model == "gpt" else prompt.split(), new))

    async def room():
        return await asyncio.gather(*(_visitor(server, path, query, presses, 0.04 * i)
                                      for i, (path, query, *_, presses) in enumerate(plans)))

    sessions = run(room())
    assert sum(p[-1] for p in plans) >= 6 and len({p[0] for p in plans if p[-1]}) == 3   # some step, on every page
    for s, (path, query, _, _, _, step, presses), r in zip(sessions, plans, runs):
        at = min(step + presses, len(r.events) - 1)
        ev = r.events[at]
        assert not s.exceptions(), (path, query, s.exceptions())
        data = s.stepper()
        # the step the server knows: the link's, then the reports (written back to the address)
        known = int(parse_qs(s.query_string).get("step", ["0"])[0]) if presses else data["start"]
        assert known == at, (path, query, s.query_string)
        f = data["payload"]["frames"][at]
        assert f["heading"] == f"Event {at} of {len(r.events) - 1}: {ev.phase}", (path, query, f["heading"])
        assert len(data["payload"]["frames"]) == len(r.events)
        chips = [tok for block in f["top"] if "strip" in block for _, tok, _ in block["strip"]["chips"]]
        assert chips == ev.sequence, (path, query, chips)
