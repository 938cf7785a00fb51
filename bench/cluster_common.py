"""What bench/cluster-affinity and bench/cluster-load share: a cluster from
scripts/serve-cluster.sh, its replicas' /metrics and RSS, and the dated
results file (JSON and a markdown table) with the command, CPU and commit."""

from __future__ import annotations

import datetime
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MODEL = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ID = "SmolLM2-135M-Instruct.Q4_1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(xs: list[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100)."""
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, int(round(p / 100 * len(s) + 0.5)) - 1))]


def parse_metrics(text: str) -> dict[str, float]:
    """Sample (name with labels) -> value."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


class Cluster:
    """scripts/serve-cluster.sh in the background, in a dir of its own;
    stopped (SIGTERM, which stops nginx and every replica) on exit."""

    def __init__(self, replicas: int, routing: str, serve_args: list[str], state_dir: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.dir = state_dir
        cmd = [str(ROOT / "scripts/serve-cluster.sh"), "--replicas", str(replicas), "--port", str(self.port),
               "--routing", routing, "--dir", str(state_dir), "--"] + serve_args
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        for line in self.proc.stderr:
            if "ready on" in line:
                break
            sys.stderr.write(line)
        else:
            sys.exit(f"cluster: serve-cluster.sh exited with {self.proc.wait()}")
        self.replicas = []  # (pid, "127.0.0.1:PORT")
        for line in (state_dir / "replicas").read_text().splitlines():
            _, pid, port = line.split()
            self.replicas.append((int(pid), f"127.0.0.1:{port}"))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.proc.stderr.close()

    def metrics(self) -> dict[str, dict[str, float]]:
        """address -> that replica's /metrics, for the replicas still up."""
        out = {}
        for _, addr in self.replicas:
            try:
                with urllib.request.urlopen(f"http://{addr}/metrics", timeout=5) as r:
                    out[addr] = parse_metrics(r.read().decode())
            except OSError:
                pass
        return out

    def rss_kib(self) -> dict[str, int]:
        """address -> VmRSS of that replica's process."""
        out = {}
        for pid, addr in self.replicas:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    out[addr] = int(line.split()[1])
        return out


def git_commit() -> str:
    """HEAD's short hash, with -dirty when tracked files differ from it."""
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return commit + ("-dirty" if dirty else "")


def machine() -> dict:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    return {"cpu": cpu, "cores": os.cpu_count(), "commit": git_commit(),
            "date": datetime.datetime.now().isoformat(timespec="seconds")}


def write_results(name: str, data: dict, markdown: str, out: str | None) -> Path:
    """bench/results/DATE-NAME.{json,md} (or `out` and its .md sibling)."""
    path = Path(out) if out else ROOT / "bench/results" / f"{datetime.date.today().isoformat()}-{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    m = data["machine"]
    header = (f"# {name}\n\n`{data['command']}`\n\n{m['date']}, {m['cpu']} ({m['cores']} cores), "
              f"commit {m['commit']}\n\n")
    path.write_text(json.dumps(data, indent=2) + "\n")
    path.with_suffix(".md").write_text(header + markdown + "\n")
    return path
