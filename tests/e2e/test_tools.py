"""Tool calling end to end with the openai client: the reply constrained to a call whose arguments match the
schema, returned as message.tool_calls (or streamed as delta.tool_calls), and the history with the call and a
`tool` message rendered back for the final answer. Each runs twice: on the e2e server, whose template has no
tool syntax (kvlab's generic format, tools in a system-prompt section), and on the same model with Qwen 2.5's
template (Hermes-style <tool_call> blocks; the template renders the tools and the history)."""
import json
import os
from pathlib import Path

import openai
import pytest
import requests

from gguf_template import copy_with_chat_template
from test_server import extra_server

URL = os.environ.get("KVLAB_E2E_URL", "http://127.0.0.1:8080")
MODEL_ID = "SmolLM2-135M-Instruct.Q4_1"
ROOT = Path(__file__).resolve().parents[2]
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 40},
                                                    "unit": {"enum": ["celsius", "fahrenheit"]}},
                   "required": ["city", "unit"], "additionalProperties": False}}},
         {"type": "function", "function": {"name": "get_time", "parameters": {
             "type": "object", "properties": {"timezone": {"type": "string", "maxLength": 40}},
             "required": ["timezone"], "additionalProperties": False}}}]
QUESTION = [{"role": "user", "content": "What is the weather in Paris right now?"}]


@pytest.fixture(scope="module")
def hermes_url(tmp_path_factory):
    """A server of the e2e model with Qwen 2.5's template, copied at run time under the same name."""
    model = tmp_path_factory.mktemp("hermes") / f"{MODEL_ID}.gguf"
    copy_with_chat_template(os.environ.get("KVLAB_E2E_MODEL", ROOT / "models" / f"{MODEL_ID}.gguf"), model,
                            (ROOT / "tests/data/chat_templates/qwen2.5-instruct.jinja").read_text(encoding="utf-8"))
    with extra_server("--parallel", "2", "-c", "2048", model=str(model)) as url:
        yield url


@pytest.fixture(params=["generic", "hermes"])
def client(request):
    url = URL if request.param == "generic" else request.getfixturevalue("hermes_url")
    return openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=120)


def check_call(call):
    assert call.type == "function" and call.id.startswith("call_")
    args = json.loads(call.function.arguments)
    if call.function.name == "get_weather":
        assert set(args) == {"city", "unit"} and isinstance(args["city"], str)
        assert args["unit"] in ("celsius", "fahrenheit")
    else:
        assert call.function.name == "get_time" and set(args) == {"timezone"}
    return args


def test_round_trip(client):
    r = client.chat.completions.create(model=MODEL_ID, messages=QUESTION, tools=TOOLS, tool_choice="required",
                                       temperature=0, max_tokens=120)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None and choice.message.tool_calls
    for call in choice.message.tool_calls:
        check_call(call)
    call = choice.message.tool_calls[0]
    history = QUESTION + [choice.message.model_dump(exclude_none=True),
                          {"role": "tool", "tool_call_id": call.id, "content": "22 degrees celsius and sunny"}]
    final = client.chat.completions.create(model=MODEL_ID, messages=history, tools=TOOLS, tool_choice="none",
                                           temperature=0, max_tokens=60)
    assert final.choices[0].finish_reason in ("stop", "length")
    assert final.choices[0].message.content and not final.choices[0].message.tool_calls


def test_streamed_named_call(client):
    stream = client.chat.completions.create(model=MODEL_ID, messages=QUESTION, tools=TOOLS, temperature=0,
                                            max_tokens=120, stream=True, parallel_tool_calls=False,
                                            tool_choice={"type": "function", "function": {"name": "get_weather"}})
    deltas = [c.choices[0] for c in stream if c.choices]
    calls = [d.delta.tool_calls[0] for d in deltas if d.delta.tool_calls]
    assert calls[0].index == 0 and calls[0].id.startswith("call_") and calls[0].type == "function"
    assert calls[0].function.name == "get_weather"
    arguments = "".join(c.function.arguments or "" for c in calls)
    args = json.loads(arguments)
    assert set(args) == {"city", "unit"}
    assert all(c.index == 0 for c in calls)  # parallel_tool_calls false: one call
    assert deltas[-1].finish_reason == "tool_calls"
    whole = client.chat.completions.create(model=MODEL_ID, messages=QUESTION, tools=TOOLS, temperature=0,
                                           max_tokens=120, parallel_tool_calls=False,
                                           tool_choice={"type": "function", "function": {"name": "get_weather"}})
    assert json.loads(whole.choices[0].message.tool_calls[0].function.arguments) == args
    # The round trip's second half, streamed: the call and its result in the history, then the answer as text.
    history = QUESTION + [{"role": "assistant", "content": None, "tool_calls": [
        {"id": calls[0].id, "type": "function", "function": {"name": "get_weather", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": calls[0].id, "content": "22 degrees celsius and sunny"}]
    answer = list(client.chat.completions.create(model=MODEL_ID, messages=history, tools=TOOLS, tool_choice="none",
                                                 temperature=0, max_tokens=60, stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in answer if c.choices)
    assert text and not any(c.choices[0].delta.tool_calls for c in answer if c.choices)
    assert answer[-1].choices[0].finish_reason in ("stop", "length")


def test_auto_is_text_or_a_call(client):
    for seed in range(3):
        r = client.chat.completions.create(model=MODEL_ID, messages=QUESTION, tools=TOOLS, temperature=1, seed=seed,
                                           max_tokens=60)
        m = r.choices[0].message
        if m.tool_calls:
            assert r.choices[0].finish_reason == "tool_calls" and m.content is None
            for call in m.tool_calls:
                check_call(call)
        else:
            assert m.content and not m.content.startswith("<")


def test_hermes_calls_are_tagged_blocks(hermes_url):
    """A call cut short comes back as its raw text: the model's own <tool_call> block, not kvlab's array."""
    r = requests.post(hermes_url + "/v1/chat/completions", timeout=120, json={
        "messages": QUESTION, "tools": TOOLS, "tool_choice": "required", "temperature": 0, "max_tokens": 12})
    choice = r.json()["choices"][0]
    assert choice["finish_reason"] == "length"
    assert choice["message"]["content"].startswith('<tool_call>\n{"name"'), choice


def test_tool_errors_are_400():
    def post(path, body):
        return requests.post(URL + path, json={"max_tokens": 4, **body}, timeout=30)
    r = post("/v1/chat/completions", {"messages": QUESTION, "tools": TOOLS,
                                      "tool_choice": {"type": "function", "function": {"name": "nope"}}})
    assert r.status_code == 400 and r.json()["error"]["param"] == "tool_choice"
    r = post("/v1/chat/completions", {"messages": QUESTION + [{"role": "tool", "content": "x"}]})
    assert r.status_code == 400 and r.json()["error"]["param"] == "messages[1].tool_call_id"
    r = post("/v1/completions", {"prompt": "x", "tools": TOOLS})
    assert r.status_code == 400 and r.json()["error"]["param"] == "tools"
    bad = [{"type": "function", "function": {"name": "f", "parameters": {"type": "string", "minLength": 3,
                                                                        "maxLength": 1}}}]
    r = post("/v1/chat/completions", {"messages": QUESTION, "tools": bad, "tool_choice": "required"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "tools[0].function.parameters"
