"""The static export is the same twice: two exports of the same screens with the same settings are the
same files, byte for byte (kvviz/ui/export/site.py: "nothing in the folder depends on the time or the
machine"). The screens: a Tiny GPT one and SmolLM2's prompt lookup, whose round title once carried
the verification pass's time measured during the export ("… (304 ms)" against "(283 ms)").

Between the two exports every Streamlit cache is cleared, so the second one runs the models again as
a fresh export process would (a cached run would hide a number measured while it ran). SmolLM2 is its
class on tiny weights (``tiny_real_smollm2``): the same pages and the same code path, in a second."""
from pathlib import Path

import pytest
import streamlit as st

from kvviz.ui.export.site import export

pytestmark = pytest.mark.app          # every screen is captured from its page (AppTest)

SCREENS = {"gpt_decode", "speculative_lookup"}
LIVE = "http://live.invalid:8501"


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_two_exports_of_the_same_screens_are_byte_identical(tmp_path, tiny_real_smollm2):
    first = export(tmp_path / "a", "es", live_url=LIVE, only=SCREENS)
    st.cache_resource.clear()
    st.cache_data.clear()
    second = export(tmp_path / "b", "es", live_url=LIVE, only=SCREENS)
    assert sorted(s.key for s in first.screens) == sorted(SCREENS) == sorted(s.key for s in second.screens)
    a, b = _files(tmp_path / "a"), _files(tmp_path / "b")
    assert sorted(a) == sorted(b)
    differ = [name for name in a if a[name] != b[name]]
    assert not differ, f"written differently the second time: {differ}"
