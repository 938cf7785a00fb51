"""Aggregate decode throughput of `kvlab serve` at 1, 2, 4... concurrent streams.
Usage: python bench_streams.py URL [max_tokens] [concurrency ...]   (server with --parallel >= max concurrency)"""
import sys
import threading
import time

import requests


def one(url, i, n, out):
    r = requests.post(url + "/v1/completions", timeout=600, json={
        "prompt": f"Tell story number {i}.", "max_tokens": n, "temperature": 0.8, "seed": i, "ignore_eos": True})
    r.raise_for_status()
    out[i] = r.json()


def main():
    url = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 64
    levels = [int(c) for c in sys.argv[3:]] or [1, 2, 4]
    for c in levels:
        out = {}
        t0 = time.time()
        threads = [threading.Thread(target=one, args=(url, i, n, out)) for i in range(c)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.time() - t0
        toks = sum(o["usage"]["completion_tokens"] for o in out.values())
        per_stream = [o["timings"]["predicted_per_second"] for o in out.values()]
        print(f"streams={c}  tokens={toks}  wall={wall:.2f}s  aggregate={toks / wall:.1f} tok/s  "
              f"per-stream decode={sum(per_stream) / c:.1f} tok/s (sum {sum(per_stream):.1f})")


if __name__ == "__main__":
    main()
