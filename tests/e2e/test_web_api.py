"""The endpoints behind the web page of `kvlab serve` (started by run.sh; URL
in KVLAB_E2E_URL): the page and its static files, /api/catalog, the live race
(/api/race, SSE), the phases timeline (/api/phases) and the simulator's
layout fields (/api/simulate's tp, pp and link)."""
import json
import os
import time

import requests

from test_server import check_error, sse_events

URL = os.environ.get("KVLAB_E2E_URL", "http://127.0.0.1:8080")


def race(**params):
    return requests.get(URL + "/api/race", params=params, stream=True, timeout=120)


def wait_until_free(deadline_s=20):
    """The race/phases lease is free again: a one-token race is accepted."""
    deadline = time.time() + deadline_s
    while time.time() < deadline:
        r = requests.get(URL + "/api/race", params={"prompt": "hi", "n": 1}, timeout=60)
        if r.status_code == 200:
            return True
        assert r.status_code == 503, r.text
        time.sleep(0.2)
    return False


# ---- the page ------------------------------------------------------------------------

def test_page_and_static_files():
    r = requests.get(URL + "/", timeout=10)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/html")
    assert "/static/app.js" in r.text and "/static/chart.js" in r.text
    assert "/static/loop.js" in r.text and "/static/serve_load.js" in r.text
    for name, kind in (("app.js", "text/javascript"), ("loop.js", "text/javascript"),
                       ("serve_load.js", "text/javascript"), ("style.css", "text/css")):
        r = requests.get(URL + "/static/" + name, timeout=10)
        assert r.status_code == 200 and r.headers["Content-Type"].startswith(kind) and r.text
    # Debian's libjs-chart.js, installed by scripts/install-deps.sh
    r = requests.get(URL + "/static/chart.js", timeout=10)
    assert r.status_code == 200 and "Chart.js v3" in r.text[:200]
    check_error(requests.get(URL + "/static/nope.js", timeout=10), 404)
    check_error(requests.get(URL + "/static/..%2Fsrc%2Fserver%2Fsse.h", timeout=10), 404)


def test_catalog():
    r = requests.get(URL + "/api/catalog", timeout=10)
    assert r.status_code == 200, r.text
    c = r.json()
    assert c["defaults"] == {"model": "llama-3.1-8b", "hw": "h100"}
    assert "llama-3.1-8b" in [m["id"] for m in c["models"]]
    assert {"h100", "a100"} <= {h["id"] for h in c["hardware"]}
    assert all(h["name"] for h in c["hardware"])
    assert {"nvlink4", "pcie5"} <= {link["id"] for link in c["links"]}


# ---- /api/race -------------------------------------------------------------------------

def test_race_stream():
    r = race(prompt="Why is the sky blue?", n=3)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/event-stream")
    events = list(sse_events(r))
    assert events[-1] == "[DONE]"
    parsed = [json.loads(e) for e in events[:-1]]
    prompt, tokens, summary = parsed[0], parsed[1:-1], parsed[-1]
    assert prompt["type"] == "prompt" and prompt["n"] == 3
    assert len(prompt["tokens"]) == summary["prompt_tokens"] and "Why" in "".join(prompt["tokens"])
    # one token of each mode in turn
    assert [(t["mode"], t["index"]) for t in tokens] == [
        (m, i) for i in range(3) for m in ("cached", "no_cache")]
    assert all(t["type"] == "token" and t["latency_ms"] > 0 for t in tokens)
    prompt_tokens = summary["prompt_tokens"]
    assert all(t["position"] == prompt_tokens + t["index"] for t in tokens)
    cached = [t for t in tokens if t["mode"] == "cached"]
    naive = [t for t in tokens if t["mode"] == "no_cache"]
    assert [t["token"] for t in cached] == [t["token"] for t in naive]
    assert summary["type"] == "summary" and summary["identical"] is True and summary["n"] == 3
    assert summary["text"] == "".join(t["token_text"] for t in cached)
    for mode in ("cached", "no_cache"):
        s = summary[mode]
        assert s["ttft_ms"] > 0 and s["decode_tok_s"] > 0 and s["tok_s"] > 0 and s["total_ms"] >= s["ttft_ms"]
    assert summary["decode_speedup"] > 0
    # The work of each token: one new row with the cache after the prefill, every row without.
    for t in tokens:
        w = t["work"]
        assert w["first_row"] + w["rows"] == t["position"]
        assert w["rows"] == (1 if t["mode"] == "cached" and t["index"] > 0 else t["position"])
        assert w["attended"] == sum(r + 1 for r in range(w["first_row"], t["position"]))
        assert w["attention_flops"] > 0 and w["kv_bytes"] > 0 and w["weight_bytes"] > 0


def test_race_argument_errors():
    check_error(requests.get(URL + "/api/race", timeout=10), 400, code="missing_required_parameter", param="prompt")
    check_error(requests.get(URL + "/api/race", params={"prompt": ""}, timeout=10), 400, param="prompt")
    for n in ("abc", "1.5", "", "4x"):
        check_error(requests.get(URL + "/api/race", params={"prompt": "hi", "n": n}, timeout=10), 400,
                    code="invalid_type", param="n")
    for n in ("0", "-3", "257", "99999999999999999999"):
        check_error(requests.get(URL + "/api/race", params={"prompt": "hi", "n": n}, timeout=10), 400, param="n")
    # 800 words plus 256 tokens do not fit the e2e server's context of 1024
    check_error(requests.get(URL + "/api/race", params={"prompt": "hello " * 800, "n": 256}, timeout=30), 400,
                code="context_length_exceeded", param="prompt")


def test_race_one_at_a_time_and_stops_when_the_client_leaves():
    # 256 tokens without the cache would take minutes: only stopping on disconnect frees the lease soon.
    r = race(prompt="Write a long story.", n=256)
    assert r.status_code == 200
    events = sse_events(r)
    next(events)
    check_error(race(prompt="hi", n=1), 503, code="server_busy")
    check_error(requests.post(URL + "/api/phases", json={"prompt": "hi", "n": 1}, timeout=30), 503, code="server_busy")
    r.close()
    assert wait_until_free(), "the race kept running after its client disconnected"


# ---- /api/phases -----------------------------------------------------------------------

def test_phases():
    r = requests.post(URL + "/api/phases", json={"prompt": "Count from one to ten.", "n": 8}, timeout=120)
    assert r.status_code == 200, r.text
    p = r.json()
    assert p["kv_cache"] is True and p["prompt_tokens"] > 0 and 1 <= len(p["tokens"]) <= 8
    toks = p["tokens"]
    assert toks[0]["phase"] == "prefill" and all(t["phase"] == "decode" for t in toks[1:])
    assert toks[0]["start_ms"] == 0
    for a, b in zip(toks, toks[1:]):  # a timeline without gaps or overlaps
        assert a["end_ms"] == b["start_ms"] and b["end_ms"] >= b["start_ms"]
    assert p["total_ms"] == toks[-1]["end_ms"]
    assert p["ttft_ms"] > 0 and p["text"] == "".join(t["text"] for t in toks)
    phases = {ph["phase"]: ph for ph in p["phases"]}
    assert phases["prefill"]["passes"] >= 1 and phases["prefill"]["tokens"] == p["prompt_tokens"]
    if len(toks) > 1:
        assert phases["decode"]["passes"] == len(toks) - 1
    if p["peaks"] is None:  # no `kvlab probe` profile on this machine
        assert "kvlab probe" in p["profile_message"]
    else:
        assert p["peaks"]["flops"] > 0 and p["peaks"]["bytes_per_s"] > 0
        assert all(ph["verdict"]["bound"] in ("memory-bound", "compute-bound") for ph in p["phases"])


def test_phases_without_cache():
    r = requests.post(URL + "/api/phases", json={"prompt": "Say hi.", "n": 3, "no_kv_cache": True}, timeout=120)
    assert r.status_code == 200, r.text
    p = r.json()
    assert p["kv_cache"] is False
    if len(p["tokens"]) > 1:  # every recompute pass pushes the whole sequence through
        decode = next(ph for ph in p["phases"] if ph["phase"] == "decode")
        assert decode["tokens"] > decode["passes"] * p["prompt_tokens"]


def test_phases_argument_errors():
    post = lambda body: requests.post(URL + "/api/phases", json=body, timeout=30)
    check_error(post({}), 400, code="missing_required_parameter", param="prompt")
    check_error(post({"prompt": 7}), 400, param="prompt")
    check_error(post({"prompt": "hi", "n": "8"}), 400, code="invalid_type", param="n")
    check_error(post({"prompt": "hi", "n": 2.5}), 400, param="n")
    check_error(post({"prompt": "hi", "n": 1000}), 400, param="n")
    check_error(post({"prompt": "hi", "no_kv_cache": "yes"}), 400, param="no_kv_cache")
    check_error(requests.post(URL + "/api/phases", data=b"{", headers={"Content-Type": "application/json"}), 400)


# ---- /api/simulate over several devices -------------------------------------------------

def simulate(**body):
    return requests.post(URL + "/api/simulate", json={"model": "llama-3.1-70b", "hw": "h100", "gen": 4, **body},
                         timeout=30)


def test_simulate_layout():
    one, two = simulate().json(), simulate(tp=2).json()
    assert one["layout"] == {"tp": 1, "pp": 1, "devices": 1, "link": None}
    assert two["layout"]["tp"] == 2 and two["layout"]["link"]["id"] == "nvlink4"  # the H100's own
    assert one["memory"]["fits"] is False and two["memory"]["fits"] is True
    share = two["memory"]["per_device"]["weight_bytes"] / one["memory"]["per_device"]["weight_bytes"]
    assert 0.5 <= share < 0.51, share  # the matrices halved; the small norms kept whole on each device
    assert one["steps"][-1]["cached"]["comm_ms"] == 0 < two["steps"][-1]["cached"]["comm_ms"]
    pcie = simulate(tp=2, pp=2, link="pcie5").json()
    assert pcie["layout"]["devices"] == 4 and pcie["layout"]["link"]["id"] == "pcie5"
    assert pcie["steps"][-1]["cached"]["comm_ms"] > two["steps"][-1]["cached"]["comm_ms"]  # a slower link


def test_simulate_layout_errors():
    for body in ({"tp": 0}, {"pp": -1}, {"tp": 64, "pp": 2}, {"tp": 99999999999}, {"tp": 2, "link": "carrier-pigeon"}):
        check_error(simulate(**body), 400)
    for body in ({"tp": "2"}, {"link": 4}):
        check_error(simulate(**body), 400, code="invalid_type")
