"""Hostile and unusual clients of `kvlab serve`, over raw sockets where a client
library would hide what the server does: oversized and chunked bodies, slow
and idle connections, half-closes, HTTP/1.0, clients that stop reading.

Most tests use the suite's server (run.sh); those that need other limits use
`hostile_server`: short timeouts, 4 slots and a queue of 8, a connection cap
of 16, small output buffers, and an API key from the environment."""
import contextlib
import json
import os
import socket
import threading
import time

import pytest
import requests

from test_server import URL, extra_server

KEY = "env-key"
AUTH = {"Authorization": "Bearer " + KEY}
COMPLETION = b"/v1/completions"


def address(url):
    host, port = url.split("//")[1].split(":")
    return host, int(port)


def connect(url, timeout=10):
    return socket.create_connection(address(url), timeout=timeout)


def post_bytes(path, body, *headers, version=b"HTTP/1.1"):
    head = [b"POST " + path + b" " + version, b"Host: x", b"Content-Type: application/json",
            b"Content-Length: " + str(len(body)).encode(), *headers]
    return b"\r\n".join(head) + b"\r\n\r\n" + body


def read_all(s, limit_s=60):
    """Everything the server sends until it closes the connection."""
    s.settimeout(limit_s)
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    return data


def read_head(s, limit_s=10):
    """The status code and header block of the first response (1xx skipped)."""
    s.settimeout(limit_s)
    data = b""
    while True:
        while b"\r\n\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                raise AssertionError(f"closed before a response head: {data!r}")
            data += chunk
        head, data = data.split(b"\r\n\r\n", 1)
        status = int(head.split(b" ")[1])
        if status >= 200:
            return status, head.decode("latin-1")


def split_response(raw):
    """(status line, headers dict, body) of the final response in `raw`, 1xx skipped."""
    while True:
        head, body = raw.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        if int(lines[0].split(" ")[1]) >= 200:
            headers = {k.lower(): v for k, v in (line.split(": ", 1) for line in lines[1:])}
            return lines[0], headers, body
        raw = body


def dechunk(body):
    out = b""
    while True:
        size_line, body = body.split(b"\r\n", 1)
        size = int(size_line, 16)
        if size == 0:
            return out
        out, body = out + body[:size], body[size + 2:]


def counters(url, headers=None):
    values = {}
    for line in requests.get(url + "/metrics", headers=headers, timeout=10).text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values


CANCELLED = 'kvlab_requests_total{finish_reason="cancelled"}'


def wait_idle(url, headers=None, limit_s=30):
    deadline = time.time() + limit_s
    while time.time() < deadline:
        m = counters(url, headers)
        if m["kvlab_requests_running"] == 0 and m["kvlab_requests_waiting"] == 0:
            return m
        time.sleep(0.1)
    raise AssertionError("the server's slots did not come free")


@pytest.fixture(scope="module")
def hostile_server():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KVLAB_API_KEY", KEY)
        with extra_server("--parallel", "4", "--max-queue", "8", "-c", "2048", "--header-timeout", "3",
                          "--body-timeout", "2", "--write-timeout", "2", "--max-connections", "16",
                          "--max-unsent", "4096") as url:
            yield url


# ---- 1. body limits, chunked or not ---------------------------------------------------------------

def test_chunked_body_over_the_limit_gets_413_as_it_arrives():
    s = connect(URL)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Transfer-Encoding: chunked\r\n\r\n")
    chunk = format(65536, "x").encode() + b"\r\n" + b"a" * 65536 + b"\r\n"

    def upload():  # 50 MB unless the server stops reading it
        with contextlib.suppress(OSError):
            for _ in range(800):
                s.sendall(chunk)

    start = time.time()
    threading.Thread(target=upload, daemon=True).start()
    status, _ = read_head(s)
    assert status == 413 and time.time() - start < 5
    s.close()
    assert requests.get(URL + "/health", timeout=5).status_code == 200


def test_content_length_over_the_limit_gets_413_before_the_body():
    with connect(URL) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2097152\r\n\r\n")
        start = time.time()
        status, head = read_head(s, limit_s=5)
        assert status == 413 and time.time() - start < 2
        assert "Connection: close" in head


# ---- 2. slow and idle clients ---------------------------------------------------------------------

def test_slow_clients_do_not_starve_health():
    slow = []
    try:
        for _ in range(100):
            s = connect(URL)
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")  # and never the rest
            slow.append(s)
        times = []
        for _ in range(20):
            start = time.time()
            assert requests.get(URL + "/health", timeout=5).status_code == 200
            times.append(time.time() - start)
        assert max(times) < 0.5, times
    finally:
        for s in slow:
            s.close()


def test_header_timeout_closes_a_slow_client(hostile_server):
    with connect(hostile_server) as s:
        s.sendall(b"GET /health HTTP/1.1\r\n")
        start = time.time()
        assert read_all(s, limit_s=10) == b""
        assert 2.5 < time.time() - start < 8


def test_connections_past_the_cap_get_503(hostile_server):
    idle = [connect(hostile_server) for _ in range(16)]
    try:
        for _ in range(10):  # until the server has accepted all 16 (within the 3 s header timeout)
            with connect(hostile_server) as s:
                s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                line, headers, body = split_response(read_all(s, limit_s=5))
            if not line.startswith("HTTP/1.1 200"):
                break
            time.sleep(0.1)
        assert line.startswith("HTTP/1.1 503") and headers["connection"] == "close"
        assert headers["retry-after"] == "1" and json.loads(body)["error"]["code"] == "server_busy"
    finally:
        for s in idle:
            s.close()
    deadline = time.time() + 5  # the closed ones free their places
    while time.time() < deadline and requests.get(hostile_server + "/health", timeout=5).status_code != 200:
        time.sleep(0.1)
    assert requests.get(hostile_server + "/health", timeout=5).status_code == 200


# ---- 3. a request that can never be admitted -----------------------------------------------------

def test_n_beyond_slots_and_queue_is_400_not_503(hostile_server):
    before = counters(hostile_server, AUTH)
    r = requests.post(hostile_server + "/v1/completions", headers=AUTH, timeout=30,
                      json={"prompt": "hi", "max_tokens": 1, "n": 13})
    assert r.status_code == 400 and "Retry-After" not in r.headers, r.text
    err = r.json()["error"]
    assert err["param"] == "n" and "12" in err["message"]
    r = requests.post(hostile_server + "/v1/completions", headers=AUTH, timeout=60,
                      json={"prompt": "hi", "max_tokens": 1, "n": 12})
    assert r.status_code == 200 and len(r.json()["choices"]) == 12
    assert counters(hostile_server, AUTH)[CANCELLED] == before[CANCELLED]


# ---- 4. half-close --------------------------------------------------------------------------------

def test_half_closed_client_gets_its_whole_answer():
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0}).encode()
    with connect(URL) as s:
        s.sendall(post_bytes(COMPLETION, body))
        s.shutdown(socket.SHUT_WR)
        line, headers, rest = split_response(read_all(s))
    assert line == "HTTP/1.1 200 OK"
    answer = json.loads(rest[:int(headers["content-length"])])
    assert answer["usage"]["completion_tokens"] > 0 and answer["choices"][0]["text"]


def test_half_closed_client_gets_its_whole_stream():
    body = json.dumps({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8, "stream": True}).encode()
    with connect(URL) as s:
        s.sendall(post_bytes(b"/v1/chat/completions", body))
        s.shutdown(socket.SHUT_WR)
        line, headers, rest = split_response(read_all(s))
    assert line == "HTTP/1.1 200 OK" and headers["transfer-encoding"] == "chunked"
    events = [e for e in dechunk(rest).decode().split("\n\n") if e]
    assert events[-1] == "data: [DONE]" and len(events) > 3


# ---- 5. HTTP/1.0 ----------------------------------------------------------------------------------

def test_http10_stream_is_close_delimited():
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": 6, "stream": True}).encode()
    with connect(URL) as s:
        s.sendall(post_bytes(COMPLETION, body, version=b"HTTP/1.0"))
        line, headers, rest = split_response(read_all(s))
    assert line == "HTTP/1.0 200 OK"
    assert "transfer-encoding" not in headers and headers["connection"] == "close"
    events = [e for e in rest.decode().split("\n\n") if e]
    assert events[-1] == "data: [DONE]" and json.loads(events[0][6:])["object"] == "text_completion"


def test_http10_plain_answer_has_a_length():
    with connect(URL) as s:
        s.sendall(b"GET /health HTTP/1.0\r\n\r\n")
        line, headers, rest = split_response(read_all(s))
    assert line == "HTTP/1.0 200 OK" and rest == b'{"status":"ok"}'
    assert headers["content-length"] == "15" and headers["connection"] == "close"


# ---- 6. the smaller ones --------------------------------------------------------------------------

def test_bearer_scheme_in_any_case_and_key_from_the_environment(hostile_server):
    for scheme in ("Bearer", "bearer", "BEARER"):
        r = requests.post(hostile_server + "/tokenize", json={"content": "hi"},
                          headers={"Authorization": f"{scheme} {KEY}"}, timeout=10)
        assert r.status_code == 200, (scheme, r.text)
    r = requests.post(hostile_server + "/tokenize", json={"content": "hi"},
                      headers={"Authorization": "Basic " + KEY}, timeout=10)
    assert r.status_code == 401


def test_api_key_file_keeps_the_key_off_the_command_line(tmp_path):
    key_file = tmp_path / "key"
    key_file.write_text("file-key\n")
    with extra_server("--parallel", "1", "-c", "256", "--api-key-file", str(key_file)) as url:
        assert requests.get(url + "/v1/models", timeout=10).status_code == 401
        r = requests.get(url + "/v1/models", headers={"Authorization": "Bearer file-key"}, timeout=10)
        assert r.status_code == 200


def test_wrong_method_on_a_known_route_is_405_with_allow():
    r = requests.post(URL + "/health", timeout=5)
    assert r.status_code == 405 and r.headers["Allow"] == "GET, HEAD"
    assert r.json()["error"]["message"] == "method not allowed"
    r = requests.get(URL + "/v1/completions", timeout=5)
    assert r.status_code == 405 and r.headers["Allow"] == "POST"
    assert requests.get(URL + "/v1/nope", timeout=5).status_code == 404


def test_oversized_header_is_431():
    with connect(URL) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 9000 + b"\r\n\r\n")
        status, _ = read_head(s, limit_s=5)
    assert status == 431


def test_client_that_stops_reading_is_dropped_and_its_sequence_cancelled(hostile_server):
    before = wait_idle(hostile_server, AUTH)
    # Big chunks (4 choices, 5 alternatives per token) into small buffers (--max-unsent 4096), so that
    # they fill in a few steps even on a slow (sanitized) build.
    body = json.dumps({"prompt": "Count:", "max_tokens": 1000, "n": 4, "stream": True, "ignore_eos": True,
                       "logprobs": 5}).encode()
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(address(hostile_server))
    s.sendall(post_bytes(COMPLETION, body, b"Authorization: Bearer " + KEY.encode()))
    assert read_head(s)[0] == 200
    try:  # reads no more
        deadline = time.time() + 60
        while time.time() < deadline:
            m = counters(hostile_server, AUTH)
            if m[CANCELLED] == before[CANCELLED] + 4 and m["kvlab_requests_running"] == 0:
                break
            time.sleep(0.2)
        assert m[CANCELLED] == before[CANCELLED] + 4 and m["kvlab_requests_running"] == 0
        assert m["kvlab_generation_tokens_total"] - before["kvlab_generation_tokens_total"] < 4000
    finally:
        s.close()
