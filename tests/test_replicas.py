"""Two ``streamlit run`` replicas behind nginx (tools/replicas.py), through Streamlit's own websocket
protocol (tools/st_session.py, no browser): a visitor's first request gets a cookie and one replica,
the page's files and its websocket reach that same replica, the page runs there (the A/B/C page at
event 4, no exception), and new visitors are spread over both replicas."""
import asyncio
import os
import shutil

import pytest

from tools.replicas import COOKIE, Replicas, free_port
from tools.st_session import Connection, Session

pytestmark = pytest.mark.app


@pytest.fixture(scope="module")
def replicas():
    if shutil.which("nginx") is None:
        if os.environ.get("CI"):
            pytest.fail("nginx is required in CI: apt-get install -y nginx")
        pytest.skip("nginx not installed")
    # routing is tested here, not the pages' warm-up (tests/test_warmup.py): the replicas load the
    # engine but leave each page's default run to its first visit
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KVVIZ_WARM", "imports")
        with Replicas(2, free_port(), "127.0.0.1") as r:
            yield r


async def _get(url: str, path: str, cookie: str = "") -> tuple[int, dict[str, list[str]]]:
    c = Connection(url)
    try:
        status, headers, _ = await c.get(path, cookie)
    finally:
        await c.close()
    return status, headers


def test_a_visitor_stays_on_one_replica_and_visitors_use_both(replicas):
    async def visit(cookie: str) -> tuple[str, Session]:
        status, headers = await _get(replicas.url, "/ABC_miniature?step=4", cookie)
        assert status == 200
        replica = headers["x-kvviz-replica"][0]
        for path in ("/app/static/PLOTLY_LICENSE.txt", "/_stcore/health"):     # its files: the same replica
            st, h = await _get(replicas.url, path, cookie)
            assert st == 200 and h["x-kvviz-replica"] == [replica], path
        s = Session(replicas.url, "ABC_miniature", "step=4", timeout=120, headers={"Cookie": cookie})
        await s.open()
        return replica, s

    async def main():
        firsts = [await _get(replicas.url, "/_stcore/health") for _ in range(20)]
        cookies = [h["set-cookie"][-1].split(";")[0] for _, h in firsts]
        assert all(c.startswith(COOKIE + "=") for c in cookies) and len(set(cookies)) == 20     # a new key each
        _, again = await _get(replicas.url, "/_stcore/health", cookies[0])
        assert not any(c.startswith(COOKIE + "=") for c in again.get("set-cookie", []))   # one key per visitor
        by_replica = {}
        for (_, h), cookie in zip(firsts, cookies):
            by_replica.setdefault(h["x-kvviz-replica"][0], cookie)
        assert set(by_replica) == {f"127.0.0.1:{p}" for p in replicas.ports}      # both replicas in use
        for replica, cookie in by_replica.items():
            for _ in range(2):                         # the page, twice: the same replica every time
                got, s = await visit(cookie)
                try:
                    assert got == replica == s.response_headers["x-kvviz-replica"]
                    assert not s.exceptions() and s.headings()[0] == "A/B/C miniature"
                    assert s.stepper()["start"] == 4
                finally:
                    await s.close()
    asyncio.run(main())
