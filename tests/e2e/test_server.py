"""End-to-end tests of `kvlab serve` (started by run.sh; URL in KVLAB_E2E_URL)."""
import contextlib
import json
import os
import socket
import subprocess
import threading
import time

import openai
import pytest
import requests

URL = os.environ.get("KVLAB_E2E_URL", "http://127.0.0.1:8080")
MODEL_ID = "SmolLM2-135M-Instruct.Q4_1"


@pytest.fixture(scope="session")
def client():
    return openai.OpenAI(base_url=URL + "/v1", api_key="unused", max_retries=0, timeout=120)


def metrics():
    text = requests.get(URL + "/metrics", timeout=10).text
    values = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, value = line.rsplit(" ", 1)
        values[name] = float(value)
    return text, values


def check_error(r, status, code=None, param=None):
    assert r.status_code == status, r.text
    body = r.json()
    err = body["error"]
    assert set(err) >= {"message", "type", "param", "code"}
    assert isinstance(err["message"], str) and err["message"]
    if code is not None:
        assert err["code"] == code
    if param is not None:
        assert err["param"] == param
    return err


def sse_events(resp):
    for line in resp.iter_lines():
        if line.startswith(b"data: "):
            yield line[6:].decode()


# ---- basics ----------------------------------------------------------------

def test_health_and_models(client):
    r = requests.get(URL + "/health", timeout=5)
    assert r.status_code == 200 and r.json()["status"] == "ok"
    models = client.models.list()
    assert [m.id for m in models.data] == [MODEL_ID]
    assert client.models.retrieve(MODEL_ID).id == MODEL_ID
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-17")


def test_completion(client):
    c = client.completions.create(model=MODEL_ID, prompt="The capital of France is", max_tokens=8, temperature=0)
    assert c.object == "text_completion"
    assert len(c.choices) == 1 and "Paris" in c.choices[0].text
    assert c.choices[0].finish_reason in ("length", "stop")
    u = c.usage
    assert u.prompt_tokens > 0 and 0 < u.completion_tokens <= 8
    assert u.total_tokens == u.prompt_tokens + u.completion_tokens
    assert u.prompt_tokens_details.cached_tokens == 0
    t = c.model_extra["timings"]
    assert t["prompt_n"] == u.prompt_tokens and t["prompt_ms"] > 0 and "predicted_per_second" in t


def test_completion_length_and_stop(client):
    c = client.completions.create(model=MODEL_ID, prompt="The capital of France is", max_tokens=4, temperature=0,
                                  extra_body={"ignore_eos": True})
    assert c.choices[0].finish_reason == "length" and c.usage.completion_tokens == 4
    c = client.completions.create(model=MODEL_ID, prompt="The capital of France is", max_tokens=16, temperature=0,
                                  stop=["."])
    assert c.choices[0].finish_reason == "stop"
    assert "." not in c.choices[0].text and "Paris" in c.choices[0].text


def test_chat(client):
    c = client.chat.completions.create(model=MODEL_ID, messages=[{"role": "user", "content": "What is 2+2?"}],
                                       max_tokens=12, temperature=0, seed=1)
    assert c.object == "chat.completion"
    msg = c.choices[0].message
    assert msg.role == "assistant" and msg.content
    assert c.usage.prompt_tokens > 10  # ChatML header + default system prompt


def test_json_mode(client):
    """response_format json_object: the reply is one JSON object, streamed or not."""
    messages = [{"role": "user", "content": "What is the capital of France? Answer in JSON with the key \"answer\"."}]
    r = client.chat.completions.create(model=MODEL_ID, messages=messages, max_tokens=64, temperature=0,
                                       response_format={"type": "json_object"})
    assert r.choices[0].finish_reason == "stop"
    assert isinstance(json.loads(r.choices[0].message.content), dict)
    parts = [c.choices[0].delta.content or "" for c in client.chat.completions.create(
        model=MODEL_ID, messages=messages, max_tokens=64, temperature=0, stream=True,
        response_format={"type": "json_object"}) if c.choices]
    assert "".join(parts) == r.choices[0].message.content


def test_chat_stream_include_usage(client):
    messages = [{"role": "user", "content": "Name a colour."}]
    ref = client.chat.completions.create(model=MODEL_ID, messages=messages, max_tokens=10, temperature=0)
    stream = client.chat.completions.create(model=MODEL_ID, messages=messages, max_tokens=10, temperature=0,
                                            stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == [ref.choices[0].finish_reason]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == ref.choices[0].message.content
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == ref.usage.completion_tokens
    assert all(c.usage is None for c in chunks[:-1])


def test_n_choices(client):
    """n choices: choice i is the request with seed + i; usage counts the prompt once; streamed by index."""
    kw = dict(model=MODEL_ID, prompt="Once upon a time", max_tokens=8, temperature=1.0)
    r = client.completions.create(n=3, seed=7, **kw)
    assert [c.index for c in r.choices] == [0, 1, 2]
    texts = [c.text for c in r.choices]
    assert len(set(texts)) > 1
    for i in range(3):
        one = client.completions.create(n=1, seed=7 + i, **kw)
        assert one.choices[0].text == texts[i]
        assert r.usage.prompt_tokens == one.usage.prompt_tokens
    assert r.usage.completion_tokens == sum(len(client.completions.create(seed=7 + i, logprobs=0, **kw)
                                                .choices[0].logprobs.tokens) for i in range(3))

    messages = [{"role": "user", "content": "Name a colour."}]
    ref = client.chat.completions.create(model=MODEL_ID, messages=messages, max_tokens=8, temperature=1.0, seed=3, n=2)
    stream = client.chat.completions.create(model=MODEL_ID, messages=messages, max_tokens=8, temperature=1.0, seed=3,
                                            n=2, stream=True, stream_options={"include_usage": True})
    text, roles, finishes = {0: "", 1: ""}, set(), {}
    chunks = list(stream)
    for c in chunks[:-1]:
        [choice] = c.choices
        roles |= {choice.index} if choice.delta.role == "assistant" else set()
        text[choice.index] += choice.delta.content or ""
        if choice.finish_reason:
            finishes[choice.index] = choice.finish_reason
    assert roles == {0, 1}
    assert [text[0], text[1]] == [c.message.content for c in ref.choices]
    assert finishes == {c.index: c.finish_reason for c in ref.choices}
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == ref.usage.completion_tokens
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=MODEL_ID, prompt="x", max_tokens=1, n=17)
    assert e.value.status_code == 400 and e.value.param == "n"


def test_echo_scores_the_prompt(client):
    """echo + logprobs + max_tokens 0, as lm-evaluation-harness asks for loglikelihoods (token ids or text)."""
    text = "The capital of France is Paris, and the capital of Italy is Rome."
    ids = tokenize(text)
    for prompt in (text, ids):
        r = client.completions.create(model=MODEL_ID, prompt=prompt, max_tokens=0, echo=True, logprobs=1,
                                      temperature=0)
        c = r.choices[0]
        assert c.text == text and r.usage.completion_tokens == 0
        assert len(c.logprobs.tokens) == len(ids) and "".join(c.logprobs.tokens) == text
        assert c.logprobs.token_logprobs[0] is None and c.logprobs.top_logprobs[0] is None
        assert all(lp < 0 for lp in c.logprobs.token_logprobs[1:])
        assert all(len(t) == 1 and max(t.values()) >= lp
                   for t, lp in zip(c.logprobs.top_logprobs[1:], c.logprobs.token_logprobs[1:]))
        assert c.logprobs.text_offset == [sum(len(t) for t in c.logprobs.tokens[:i]) for i in range(len(ids))]
    # With a completion: the prompt, then what the same request gives without echo.
    plain = client.completions.create(model=MODEL_ID, prompt=text, max_tokens=5, temperature=0)
    echoed = client.completions.create(model=MODEL_ID, prompt=text, max_tokens=5, temperature=0, echo=True,
                                       stream=True)
    assert "".join(ch.choices[0].text for ch in echoed) == text + plain.choices[0].text
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=MODEL_ID, messages=[{"role": "user", "content": "x"}],
                                       extra_body={"echo": True})
    assert e.value.param == "echo"


def test_completion_stream_raw():
    r = requests.post(URL + "/v1/completions", stream=True, timeout=60,
                      json={"prompt": "Once upon a time", "max_tokens": 6, "stream": True, "temperature": 0})
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/event-stream")
    events = list(sse_events(r))
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert all(c["object"] == "text_completion" for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length")


def test_two_concurrent_streams(client):
    spans = {}

    def run(i):
        start = time.time()
        stream = client.completions.create(model=MODEL_ID, prompt=f"Story number {i}:", max_tokens=24,
                                           temperature=0.7, seed=i, stream=True, extra_body={"ignore_eos": True})
        times, text = [], ""
        for c in stream:
            if c.choices and c.choices[0].text:
                times.append(time.time())
                text += c.choices[0].text
        spans[i] = (start, times, text)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert set(spans) == {0, 1}
    (_, t0, text0), (_, t1, text1) = spans[0], spans[1]
    assert text0 and text1
    # continuous batching: the two streams produce tokens during the same interval
    assert t0[0] < t1[-1] and t1[0] < t0[-1]


def test_burst_more_requests_than_slots():
    # 10 requests on 4 slots: the rest queue, some clients give up early; all others complete.
    results = {}

    def run(i):
        body = {"prompt": f"Item {i}:", "max_tokens": 6, "temperature": 0.5, "seed": i, "ignore_eos": True}
        if i % 3 == 0:
            body["stream"] = True
            r = requests.post(URL + "/v1/completions", json=body, stream=True, timeout=120)
            next(sse_events(r))
            r.close()  # disconnect (maybe still queued)
            results[i] = "closed"
        else:
            r = requests.post(URL + "/v1/completions", json=body, timeout=120)
            results[i] = r.json()["usage"]["completion_tokens"] if r.status_code == 200 else r.status_code

    threads = [threading.Thread(target=run, args=(i,)) for i in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert all(results[i] == (6 if i % 3 else "closed") for i in range(10)), results
    deadline = time.time() + 10
    while time.time() < deadline:
        _, m = metrics()
        if m["kvlab_requests_running"] == 0 and m["kvlab_requests_waiting"] == 0:
            break
        time.sleep(0.1)
    assert m["kvlab_requests_running"] == 0 and m["kvlab_requests_waiting"] == 0


def test_prefix_cache_multi_turn(client):
    # Turn 2 of a chat repeats turn 1's prompt: its whole 16-token blocks come
    # from the prefix cache (never the last prompt token), and the reply
    # equals the one computed cold for the same messages.
    system = {"role": "system", "content": "You are a terse assistant. " * 8}
    turn1 = [system, {"role": "user", "content": "Name a planet."}]
    a = client.chat.completions.create(model=MODEL_ID, messages=turn1, max_tokens=8, temperature=0)
    b = client.chat.completions.create(model=MODEL_ID, messages=turn1, max_tokens=8, temperature=0)
    assert b.choices[0].message.content == a.choices[0].message.content
    assert b.usage.prompt_tokens_details.cached_tokens == (a.usage.prompt_tokens - 1) // 16 * 16 > 0
    turn2 = turn1 + [{"role": "assistant", "content": a.choices[0].message.content},
                     {"role": "user", "content": "And another?"}]
    c = client.chat.completions.create(model=MODEL_ID, messages=turn2, max_tokens=8, temperature=0)
    assert c.usage.prompt_tokens_details.cached_tokens >= b.usage.prompt_tokens_details.cached_tokens
    _, m = metrics()
    assert m["kvlab_prefix_cache_hits_total"] >= 2
    assert m["kvlab_kv_cache_blocks_used"] == 0


def test_metrics():
    text, m = metrics()
    for h in ("kvlab_time_to_first_token_seconds", "kvlab_inter_token_latency_seconds",
              "kvlab_e2e_request_latency_seconds", "kvlab_request_queue_time_seconds"):
        assert f"# TYPE {h} histogram" in text
        assert m[h + '_bucket{le="+Inf"}'] == m[h + "_count"] > 0
    assert m["kvlab_prompt_tokens_total"] > 0 and m["kvlab_generation_tokens_total"] > 0
    assert m["kvlab_requests_running"] == 0 and m["kvlab_requests_waiting"] == 0
    assert 0 <= m["kvlab_kv_cache_usage_ratio"] <= 1
    assert m["kvlab_kv_cache_blocks"] > 0
    assert m["kvlab_prefix_cache_queries_total"] >= m["kvlab_prefix_cache_hits_total"]


def assert_cancelled_and_freed(before):
    """After a client left a 900-token request: it ends cancelled (not run to
    its length) and its slot and KV blocks are free."""
    deadline = time.time() + 15
    while time.time() < deadline:
        _, m = metrics()
        if m["kvlab_requests_running"] == 0:
            break
        time.sleep(0.1)
    assert m["kvlab_requests_running"] == 0
    key = 'kvlab_requests_total{finish_reason="cancelled"}'
    assert m[key] == before[key] + 1
    assert m["kvlab_kv_cache_usage_ratio"] == 0


def test_disconnect_mid_stream_frees_slot():
    _, before = metrics()
    r = requests.post(URL + "/v1/completions", stream=True, timeout=60,
                      json={"prompt": "Write a very long essay.", "max_tokens": 900, "stream": True,
                            "temperature": 0.8, "ignore_eos": True})
    assert r.status_code == 200
    events = sse_events(r)
    for _ in range(3):
        next(events)
    _, during = metrics()
    assert during["kvlab_requests_running"] == 1
    r.close()
    assert_cancelled_and_freed(before)


def test_disconnect_while_waiting_for_a_non_streaming_reply_frees_slot():
    # Nothing is written before a non-streaming completion is done; the server
    # must still notice the client leaving and cancel the request.
    _, before = metrics()
    body = json.dumps({"prompt": "Write a very long essay.", "max_tokens": 900, "temperature": 0.8,
                       "ignore_eos": True}).encode()
    host, port = URL.split("//")[1].split(":")
    s = socket.create_connection((host, int(port)), timeout=10)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    deadline = time.time() + 10
    while time.time() < deadline and metrics()[1]["kvlab_requests_running"] != 1:
        time.sleep(0.05)
    assert metrics()[1]["kvlab_requests_running"] == 1
    s.close()
    assert_cancelled_and_freed(before)


# ---- errors ------------------------------------------------------------------

def test_malformed_json():
    r = requests.post(URL + "/v1/completions", data=b"{not json", headers={"Content-Type": "application/json"})
    check_error(r, 400)


def test_wrong_types():
    check_error(requests.post(URL + "/v1/completions", json={"prompt": "x", "max_tokens": "ten"}), 400, param="max_tokens")
    check_error(requests.post(URL + "/v1/completions", json={"prompt": 5}), 400, param="prompt")
    check_error(requests.post(URL + "/v1/chat/completions", json={"messages": "hi"}), 400, param="messages")
    check_error(requests.post(URL + "/v1/completions", json={"prompt": "x", "temperature": 9}), 400, param="temperature")
    check_error(requests.post(URL + "/v1/completions", json={"prompt": "x", "n": 0}), 400, param="n")
    check_error(requests.post(URL + "/v1/completions", json={"prompt": "x", "n": "2"}), 400, param="n")
    check_error(requests.post(URL + "/v1/completions", json={"max_tokens": 4}), 400, param="prompt")
    check_error(requests.post(URL + "/v1/completions", json=["prompt"]), 400)
    check_error(requests.post(URL + "/v1/completions", json={"prompt": "x", "echo": "yes"}), 400, param="echo")
    check_error(requests.post(URL + "/v1/chat/completions", json={
        "messages": [{"role": "user", "content": "x"}], "logprobs": True, "top_logprobs": 30}), 400, param="top_logprobs")
    check_error(requests.post(URL + "/v1/completions", json={"prompt": "x", "logprobs": 99}), 400, param="logprobs")


def test_logprobs(client):
    """The official client reads kvlab's logprobs, in both endpoints' shapes, streamed or not."""
    r = client.completions.create(model=MODEL_ID, prompt="The capital of France is", max_tokens=6, temperature=0,
                                  logprobs=3)
    lp = r.choices[0].logprobs
    assert "".join(lp.tokens) == r.choices[0].text
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) == 6
    assert lp.text_offset == sorted(lp.text_offset) and lp.text_offset[0] == 0
    for l, top in zip(lp.token_logprobs, lp.top_logprobs):
        assert l <= 0 and 1 <= len(top) <= 3
        assert max(top.values()) == pytest.approx(l)  # greedy: the pick is the most likely
    streamed = client.completions.create(model=MODEL_ID, prompt="The capital of France is", max_tokens=6,
                                         temperature=0, logprobs=3, stream=True)
    tokens = [t for chunk in streamed if chunk.choices and chunk.choices[0].logprobs
              for t in chunk.choices[0].logprobs.tokens]
    assert tokens == lp.tokens
    c = client.chat.completions.create(model=MODEL_ID, messages=[{"role": "user", "content": "Say hello"}],
                                       max_tokens=5, temperature=0, logprobs=True, top_logprobs=2)
    content = c.choices[0].logprobs.content
    assert len(content) == 5
    assert "".join(t.token for t in content) == c.choices[0].message.content
    for t in content:
        assert bytes(t.bytes).decode("utf-8", "replace") == t.token
        assert len(t.top_logprobs) == 2 and t.top_logprobs[0].logprob == pytest.approx(t.logprob)


def tokenize(text, **kw):
    r = requests.post(URL + "/tokenize", json={"content": text, **kw}, timeout=10)
    assert r.status_code == 200, r.text
    return r.json()["tokens"]


def test_tokenize_and_detokenize():
    """llama.cpp server's /tokenize and /detokenize: ids, pieces, and back to the text."""
    text = "Hello world, café 🦩"
    ids = tokenize(text)
    assert all(isinstance(i, int) for i in ids)
    pieces = tokenize(text, with_pieces=True)
    assert [p["id"] for p in pieces] == ids
    joined = b"".join(p["piece"].encode() if isinstance(p["piece"], str) else bytes(p["piece"]) for p in pieces)
    assert joined.decode() == text
    assert any(isinstance(p["piece"], list) for p in pieces)  # the flamingo's bytes span tokens
    r = requests.post(URL + "/detokenize", json={"tokens": ids}, timeout=10)
    assert r.status_code == 200 and r.json()["content"] == text
    check_error(requests.post(URL + "/detokenize", json={"tokens": [10 ** 9]}, timeout=10), 400)
    check_error(requests.post(URL + "/tokenize", json={"text": "x"}, timeout=10), 400)


def test_logit_bias_and_penalties(client):
    """The official client's logit_bias forces a token (100) or bans one (-100); its penalties are taken."""
    def tokens(**kw):
        r = client.completions.create(model=MODEL_ID, prompt="The capital of France is", max_tokens=3, temperature=0,
                                      logprobs=0, **kw)
        return r.choices[0].logprobs.tokens
    plain = tokens()
    [bananas] = tokenize(" bananas")
    forced = tokens(logit_bias={str(bananas): 100})
    assert forced == [" bananas"] * 3 and forced != plain
    assert tokens(logit_bias={str(bananas): 100}, frequency_penalty=2, presence_penalty=2) == forced  # 100 - 2c - 2 still wins
    [first] = tokenize(plain[0])
    assert tokens(logit_bias={str(first): -100})[0] != plain[0]
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=MODEL_ID, prompt="x", max_tokens=1, logit_bias={"99999999": 1})
    assert e.value.status_code == 400 and e.value.param == "logit_bias"
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=MODEL_ID, prompt="x", max_tokens=1, presence_penalty=3)
    assert e.value.param == "presence_penalty"


def test_context_length_exceeded(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=MODEL_ID, prompt="hello " * 3000, max_tokens=4)
    assert e.value.status_code == 400 and e.value.code == "context_length_exceeded"


def test_absurd_max_tokens(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=MODEL_ID, prompt="hi", max_tokens=10**9)
    assert e.value.param == "max_tokens"
    with pytest.raises(openai.BadRequestError):
        client.completions.create(model=MODEL_ID, prompt="hi", max_tokens=0)


def test_unknown_model(client):
    with pytest.raises(openai.NotFoundError) as e:
        client.chat.completions.create(model="gpt-17", messages=[{"role": "user", "content": "hi"}], max_tokens=2)
    assert e.value.status_code == 404 and e.value.code == "model_not_found"


def test_oversized_body():
    r = requests.post(URL + "/v1/completions", data=b'{"prompt": "' + b"a" * (2 << 20) + b'"}',
                      headers={"Content-Type": "application/json"}, timeout=30)
    check_error(r, 413)


def test_unknown_route():
    check_error(requests.get(URL + "/v1/nope"), 404)


# ---- perf API ------------------------------------------------------------------

def test_api_simulate_and_diagnose():
    r = requests.post(URL + "/api/simulate", json={"model": "llama-3.1-8b", "hw": "h100", "prompt": 128, "gen": 16})
    assert r.status_code == 200, r.text
    assert isinstance(r.json(), dict)
    r = requests.post(URL + "/api/diagnose", json={"ttft_ms": 50, "decode_tok_s": 2})
    assert r.status_code == 200, r.text
    assert isinstance(r.json(), dict)
    check_error(requests.post(URL + "/api/simulate", json={"model": "no-such-model"}), 400)
    check_error(requests.post(URL + "/api/simulate", json={"model": "/etc/passwd"}), 400)
    check_error(requests.post(URL + "/api/diagnose", json={"ttft_ms": "fast"}), 400)
    check_error(requests.post(URL + "/api/diagnose", data=b"[", headers={"Content-Type": "application/json"}), 400)


def test_api_simulate_serve():
    body = {"model": "llama-3.1-8b", "hw": "h100",
            "serve": {"concurrency": 4, "requests": 20, "prompt_len": "64:256", "output_len": 32, "parallel": 4,
                      "ramp_s": 0.5, "pass_target_ms": 0}}
    r = requests.post(URL + "/api/simulate", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["load"]["ramp_s"] == 0.5 and r.json()["engine"]["pass_target_ms"] == 0
    serve = r.json()["serve"]
    assert serve["completed"] == 20 and serve["output_tokens"] == 20 * 32
    assert 0 < serve["ttft_ms"]["p50"] <= serve["ttft_ms"]["p99"] < serve["e2e_ms"]["p99"]
    assert serve["throughput_tok_s"] > 0 and serve["series"]
    assert 0 < serve["tpot_ms"]["p50"] <= serve["tpot_ms"]["p99"]
    # Speculative decoding: every draft kept, 4 per decode row, makes fewer
    # passes for the same tokens.
    body["serve"].update(draft=4, draft_accept=1)
    spec = requests.post(URL + "/api/simulate", json=body).json()
    assert spec["engine"]["draft"] == 4 and spec["load"]["draft_accept"] == 1
    assert spec["serve"]["drafts_kept"] == spec["serve"]["drafted"] > 0
    assert spec["serve"]["output_tokens"] == 20 * 32 and spec["serve"]["passes"] < serve["passes"]
    for bad in ({"rate": 0}, {"concurrency": 2, "rate": 3}, {"concurrency": 1, "prompt_len": "9:3"},
                {"concurrency": 1, "requests": 100000, "output_len": 4096}, {"concurrency": 1, "parallel": "four"},
                {"concurrency": 2, "ramp_s": -1}, {"rate": 2, "ramp_s": 1},
                {"concurrency": 1, "pass_target_ms": "soon"}, {"concurrency": 1, "pass_target_ms": -3},
                {"concurrency": 1, "draft": 65}, {"concurrency": 1, "draft": 4, "draft_accept": 2},
                {"concurrency": 1, "draft_found": "often"}):
        check_error(requests.post(URL + "/api/simulate", json={"serve": bad}), 400)
    check_error(requests.post(URL + "/api/simulate", json={"serve": [1]}), 400)


# ---- more servers, each with options of its own --------------------------------

@contextlib.contextmanager
def extra_server(*options, model=None):
    """A `kvlab serve` of `model` (the e2e model when None) on a free port with these options; its URL."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    proc = subprocess.Popen([os.environ.get("KVLAB_BIN", "build/kvlab"), "serve", "-m",
                             model or os.environ.get("KVLAB_E2E_MODEL", "models/SmolLM2-135M-Instruct.Q4_1.gguf"),
                             "--port", str(port), *options], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                if requests.get(url + "/health", timeout=1).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_speculative_decoding_server():
    """`--draft`: the same text as the plain server, fewer decode passes, and the drafts in
    the response's timings and in /metrics."""
    body = {"model": MODEL_ID, "max_tokens": 48, "temperature": 0,
            "prompt": "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n\ndef mul(a, b):"}
    plain = requests.post(URL + "/v1/completions", json=body, timeout=120).json()
    assert "draft_n" not in plain["timings"]
    with extra_server("--parallel", "2", "-c", "1024", "--draft", "4") as url:
        spec = requests.post(url + "/v1/completions", json=body, timeout=120).json()
        text = requests.get(url + "/metrics", timeout=10).text
    assert spec["choices"][0]["text"] == plain["choices"][0]["text"]
    assert spec["usage"] == plain["usage"]
    t = spec["timings"]
    assert 0 < t["draft_n_accepted"] <= t["draft_n"], t
    assert f"kvlab_spec_accepted_tokens_total {t['draft_n_accepted']}" in text
    assert f"kvlab_spec_draft_tokens_total {t['draft_n']}" in text


@pytest.fixture(scope="module")
def keyed_server():
    """API key, one slot, a tiny queue."""
    with extra_server("--parallel", "1", "--max-queue", "1", "-c", "8192", "--api-key", "sekrit") as url:
        yield url


def test_api_key(keyed_server):
    body = {"prompt": "hi", "max_tokens": 2}
    check_error(requests.post(keyed_server + "/v1/completions", json=body), 401, code="invalid_api_key")
    check_error(requests.post(keyed_server + "/v1/completions", json=body,
                              headers={"Authorization": "Bearer wrong"}), 401)
    check_error(requests.post(keyed_server + "/tokenize", json={"content": "hi"}), 401, code="invalid_api_key")
    assert requests.post(keyed_server + "/tokenize", json={"content": "hi"},
                         headers={"Authorization": "Bearer sekrit"}).json()["tokens"]
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=keyed_server + "/v1", api_key="wrong", max_retries=0).models.list()
    ok = openai.OpenAI(base_url=keyed_server + "/v1", api_key="sekrit", max_retries=0)
    assert ok.completions.create(model=MODEL_ID, prompt="hi", max_tokens=2).usage.completion_tokens >= 0
    assert requests.get(keyed_server + "/health").status_code == 200


def test_queue_full_503(keyed_server):
    headers = {"Authorization": "Bearer sekrit"}
    # Long enough that the slot stays taken until the test hangs up, whatever
    # the decode speed (400 tokens once took ~2 s and freed the slot too soon),
    # and read as it streams, so the server never blocks on a full socket.
    body = {"prompt": "Count:", "max_tokens": 4000, "stream": True, "ignore_eos": True}
    opened = []

    def stream(first_event):
        try:
            r = requests.post(keyed_server + "/v1/completions", json=body, headers=headers, stream=True, timeout=60)
            opened.append(r)
            for _ in sse_events(r):
                first_event.set()
        except (requests.RequestException, AttributeError, ValueError):
            pass  # closed by the test

    started = threading.Event()
    threading.Thread(target=stream, args=(started,), daemon=True).start()
    assert started.wait(30)  # holds the only slot
    threading.Thread(target=stream, args=(threading.Event(),), daemon=True).start()
    deadline = time.time() + 10
    while time.time() < deadline:  # wait until the second one is queued
        if "kvlab_requests_waiting 1" in requests.get(keyed_server + "/metrics").text:
            break
        time.sleep(0.05)
    r = requests.post(keyed_server + "/v1/completions", json={"prompt": "x", "max_tokens": 2}, headers=headers)
    check_error(r, 503, code="server_busy")
    assert r.headers.get("Retry-After") == "1"
    for resp in opened:
        resp.close()
    deadline = time.time() + 10
    while time.time() < deadline:  # both hung up: slot and queue free again
        m = requests.get(keyed_server + "/metrics").text
        if "kvlab_requests_running 0" in m and "kvlab_requests_waiting 0" in m:
            break
        time.sleep(0.05)


def test_web_routes_and_api_key(keyed_server):
    # The page loads without the key (a browser cannot send it when navigating); its API calls need it.
    assert requests.get(keyed_server + "/", timeout=10).status_code == 200
    assert requests.get(keyed_server + "/static/app.js", timeout=10).status_code == 200
    check_error(requests.get(keyed_server + "/api/catalog", timeout=10), 401, code="invalid_api_key")
    check_error(requests.get(keyed_server + "/api/race", params={"prompt": "hi", "n": 1}, timeout=10), 401)
    check_error(requests.post(keyed_server + "/api/phases", json={"prompt": "hi", "n": 1}, timeout=10), 401)
    headers = {"Authorization": "Bearer sekrit"}
    assert requests.get(keyed_server + "/api/catalog", headers=headers, timeout=10).status_code == 200
    r = requests.get(keyed_server + "/api/race", params={"prompt": "hi", "n": 1}, headers=headers, timeout=60)
    assert r.status_code == 200 and r.text.rstrip().endswith("data: [DONE]")
