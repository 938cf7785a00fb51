"""scripts/serve-cluster.sh: two replicas behind nginx. Prefix-affinity
routing, the X-Session-Affinity override, failover when a replica dies, and no
process left behind after SIGTERM or a Ctrl-C to its process group."""
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parents[2]
JS_MODULE = "/usr/lib/nginx/modules/ngx_http_js_module.so"
MODEL_ID = "SmolLM2-135M-Instruct.Q4_1"

pytestmark = pytest.mark.skipif(shutil.which("nginx") is None or not os.path.exists(JS_MODULE),
                                reason="nginx or its njs module absent (scripts/install-deps.sh)")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def descendants(pid):
    """pid's processes below it, from /proc."""
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        try:
            kids = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except OSError:
            continue
        for k in map(int, kids):
            out.add(k)
            todo.append(k)
    return out


def alive(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except OSError:
        return False


def listening(address):
    host, port = address.split(":")
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
        return True
    except OSError:
        return False


class Cluster:
    def __init__(self, tmp_path, routing="prefix"):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.dir = tmp_path / "cluster"
        cmd = [str(ROOT / "scripts/serve-cluster.sh"), "--replicas", "2", "--port", str(self.port),
               "--routing", routing, "--dir", str(self.dir), "--",
               "-m", os.environ.get("KVLAB_E2E_MODEL", str(ROOT / "models" / f"{MODEL_ID}.gguf")),
               "-t", "1", "-c", "1024", "--parallel", "2"]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, start_new_session=True)
        for line in self.proc.stderr:
            if "ready on" in line:
                break
        else:
            pytest.fail(f"serve-cluster.sh exited with {self.proc.wait()}")
        self.replicas = {}  # "127.0.0.1:PORT" -> pid
        for line in (self.dir / "replicas").read_text().splitlines():
            _, pid, port = line.split()
            self.replicas[f"127.0.0.1:{port}"] = int(pid)
        self.processes = descendants(self.proc.pid)

    def complete(self, prompt, headers=None):
        r = requests.post(self.url + "/v1/completions", headers=headers or {}, timeout=60,
                          json={"model": MODEL_ID, "prompt": prompt, "max_tokens": 2})
        return r, r.headers.get("X-Kvlab-Replica", "")

    def stop(self, sig, group=False):
        os.killpg(self.proc.pid, sig) if group else self.proc.send_signal(sig)
        self.proc.wait(timeout=30)
        self.proc.stderr.close()


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path)
    yield c
    if c.proc.poll() is None:
        c.stop(signal.SIGTERM)


TENANT = "You are the assistant of a bakery. " * 12  # over the 256 characters the key reads


def test_shared_prefix_goes_to_one_replica(cluster):
    seen = set()
    for q in range(6):
        r, replica = cluster.complete(TENANT + f"Question {q}: what do you sell?")
        assert r.status_code == 200, r.text
        seen.add(replica)
    assert len(seen) == 1 and seen <= set(cluster.replicas)


def test_session_header_overrides_the_prompt(cluster):
    seen = {cluster.complete(f"Unrelated prompt number {q}", {"X-Session-Affinity": "user-7"})[1] for q in range(6)}
    assert len(seen) == 1


def test_a_dead_replica_is_routed_around(cluster):
    _, first = cluster.complete(TENANT + "Hello?")
    os.kill(cluster.replicas[first], signal.SIGKILL)
    # Until its last thread has exited (its main thread is a zombie sooner),
    # its listening socket still takes connections, and a request sent on one
    # fails: the in-flight case, which nginx never retries.
    while listening(first):
        time.sleep(0.01)
    for q in range(4):
        r, replica = cluster.complete(TENANT + f"Hello again {q}?")
        assert r.status_code == 200, r.text
        assert replica.split(", ")[-1] != first  # nginx may try the dead one first, then the other


@pytest.mark.parametrize("sig,group", [(signal.SIGTERM, False), (signal.SIGINT, True)], ids=["sigterm", "ctrl-c"])
def test_stop_leaves_no_process(tmp_path, sig, group):
    c = Cluster(tmp_path)
    assert c.complete("Hi")[0].status_code == 200
    assert len(c.processes) >= 4  # two replicas, nginx's master and worker
    c.stop(sig, group)
    deadline = time.time() + 5
    while any(alive(p) for p in c.processes) and time.time() < deadline:
        time.sleep(0.1)
    assert [p for p in c.processes if alive(p)] == []
    with pytest.raises(requests.ConnectionError):
        requests.get(c.url + "/health", timeout=2)


def test_prometheus_config_finds_each_replica(cluster, tmp_path):
    targets = (cluster.dir / "targets.json").read_text()
    for address in cluster.replicas:
        assert f'"{address}"' in targets
    if shutil.which("promtool") is None:
        pytest.skip("promtool absent (scripts/install-deps.sh)")
    conf = tmp_path / "prometheus.yml"
    conf.write_text((ROOT / "deploy/prometheus.yml").read_text().replace(
        "/tmp/kvlab-cluster/targets.json", str(cluster.dir / "targets.json")))
    p = subprocess.run(["promtool", "check", "config", str(conf)], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and "WARNING" not in p.stdout + p.stderr, p.stdout + p.stderr
