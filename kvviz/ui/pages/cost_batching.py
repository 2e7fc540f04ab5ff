"""Cost page, batching tab: two or three A/B/C prompts decoded together, one pass per step."""
from __future__ import annotations

import functools

import streamlit as st

from kvviz.decoding.batching import BatchRun
from kvviz.limits import MAX_NEW_TOKENS, MAX_PROMPT_CHARS, LimitError
from kvviz.models.registry import get_model
from kvviz.ui.app import presenter, urlstate
from kvviz.ui.app.i18n import t
from kvviz.ui.app.runs import cached_batch_run
from kvviz.ui.components import step_view
from kvviz.ui.components.picker import LayerHeadPicker
from kvviz.ui.frames import batching as frames_batching
from kvviz.ui.frames import translator

KEEP = "session"
MODELS = ("abc", "gpt")
# defaults per model: two or three prompts of different lengths, so the padding shows
DEFAULT_PROMPTS = {"abc": ("A B", "C A B B", "A"),
                   "gpt": ("Today the weather is so", "It was", "Tomorrow the wind")}
DEFAULT_NEW = 4


def _prompt_keys() -> list[str]:
    return [f"bt_p{i + 1}" for i in range(3)]


def _defaults() -> dict[str, object]:
    """What each URL-kept setting is when the address does not mention it."""
    model = st.session_state.get("bt_model", "abc")
    return {"bt_model": "abc", "bt_new": DEFAULT_NEW, **dict(zip(_prompt_keys(), DEFAULT_PROMPTS[model]))}


def _on_model() -> None:
    """Another model: its own example prompts (A/B/C prompts mean nothing to the GPT)."""
    for k, v in zip(_prompt_keys(), DEFAULT_PROMPTS[st.session_state.bt_model]):
        st.session_state[k] = v
    for k in ("bt_layer", "bt_head"):        # the GPT's view; meaningless for the other model
        st.session_state.pop(k, None)
        st.query_params.pop(k, None)
    urlstate.sync_all(_defaults())


def _tokens(model_name: str, text: str) -> tuple[str, ...]:
    return tuple(get_model(model_name).tokenize(text))


def _inputs() -> tuple[BatchRun, tuple] | None:
    """The batched run and its cache key (model, prompts, new tokens), or None after a message."""
    urlstate.choice_param("bt_model", MODELS, "abc")
    model = st.session_state.bt_model
    for k, v in zip(_prompt_keys(), DEFAULT_PROMPTS[model]):
        urlstate.text_param(k, v, MAX_PROMPT_CHARS)
    urlstate.int_param("bt_new", DEFAULT_NEW, 1, MAX_NEW_TOKENS)
    st.segmented_control(t("cost.bt_model"), MODELS, key="bt_model", format_func=lambda m: t("cost.bt_model_" + m),
                         on_change=_on_model, required=True, help=t("cost.bt_model_help"), persist_state=KEEP)
    defaults = _defaults()
    c = st.columns([2, 2, 2, 1])
    for i, key in enumerate(_prompt_keys()):
        c[i].text_input(t("cost.bt_prompt", i=i + 1), key=key, max_chars=MAX_PROMPT_CHARS,
                        help=t(f"cost.bt_prompt_help_{model}" if i < 2 else "cost.bt_prompt3_help"),
                        on_change=urlstate.sync, args=(key, defaults[key]), persist_state=KEEP)
    c[3].number_input(t("cost.bt_new"), step=1, key="bt_new", help=t("cost.bt_new_help", cap=MAX_NEW_TOKENS),
                      on_change=urlstate.sync, args=("bt_new", DEFAULT_NEW), persist_state=KEEP)
    try:
        texts = [st.session_state[k] or "" for k in _prompt_keys()]
        prompts = [_tokens(model, x) for x in texts]
        if not prompts[0] or not prompts[1]:
            raise LimitError(t("cost.bt_need_two"))
        key = (model, tuple(p for p in prompts if p), st.session_state.bt_new)
        return cached_batch_run(*key)[0], key
    except (LimitError, ValueError) as e:
        st.error(t("cost.bad_input", reason=str(e)), icon=":material/error:")
        return None


def render() -> None:
    presenter.intro(t("cost.bt_intro"), "present.intro_section")
    with presenter.settings():
        got = _inputs()
    if got is None:
        return
    run, key = got
    step_view.url_step_notice(len(run.events))
    step_view.page_stepper("cost.batch_step", functools.partial(_payload, *key), len(run.events), key="kvs_batch",
                           run_id=repr(key), picker=_picker(get_model(key[0])), after=_more)


@st.cache_resource(max_entries=64, ttl=3600, show_spinner=False)
def _payload(model_name: str, prompts: tuple[tuple[str, ...], ...], new: int, layer: int, head: int,
             lang: str) -> str:
    """Every event's frame of one batched run, for one layer and head, in one language (read-only JSON)."""
    run, _, comparisons = cached_batch_run(model_name, prompts, new)
    return frames_batching.build(run, comparisons, get_model(model_name), layer, head, translator(lang)).to_json()


def _more() -> None:
    with st.expander(t("cost.bt_more_title")):
        st.markdown(t("cost.bt_more_body"))


def _picker(model) -> LayerHeadPicker:
    """Layer and head (0-based) of the attention map and the K column; chosen only for the GPT."""
    labels = ("cost.bt_layer", "cost.bt_layer_help", "cost.bt_head", "cost.bt_head_help")
    return LayerHeadPicker("bt", model.n_layers, model.n_heads, labels, columns=(1, 1), align="top", persist=True)
