"""/metrics passes `promtool check metrics` (Debian's prometheus package).

promtool lints ':' in metric names (Prometheus reserves it for recording
rules), and vLLM's names, which dashboards query, all have it. So: kvlab's own
families must pass with no problem at all, and the whole page may add only
that one problem, on vllm: names."""
import os
import shutil
import subprocess

import pytest
import requests

URL = os.environ.get("KVLAB_E2E_URL", "http://127.0.0.1:8080")
MODEL_ID = "SmolLM2-135M-Instruct.Q4_1"

pytestmark = pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool absent (scripts/install-deps.sh)")


def promtool(text):
    p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
    return p.returncode, [line for line in (p.stdout + p.stderr).splitlines() if line.strip()]


def scrape():
    # One request first, so that every histogram and counter has samples.
    r = requests.post(URL + "/v1/completions", json={"model": MODEL_ID, "prompt": "Hi", "max_tokens": 2}, timeout=60)
    assert r.status_code == 200, r.text
    return requests.get(URL + "/metrics", timeout=10).text


def families(text, prefix):
    """The lines of the families whose names start with `prefix`."""
    keep, out = False, []
    for line in text.splitlines():
        name = line.split()[2] if line.startswith("# ") else line.split("{")[0].split(" ")[0]
        keep = name.startswith(prefix)
        if keep:
            out.append(line)
    return "\n".join(out) + "\n"


def test_kvlab_names_pass_promtool():
    rc, problems = promtool(families(scrape(), "kvlab_"))
    assert (rc, problems) == (0, [])


def test_vllm_names_only_lint_their_colon():
    text = scrape()
    rc, problems = promtool(text)
    assert rc in (0, 3), problems  # 3: lint problems, 1 would be a parse error
    for p in problems:
        assert p.startswith("vllm:") and p.endswith("metric names should not contain ':'"), p
    assert f'vllm:time_to_first_token_seconds_count{{model_name="{MODEL_ID}",engine="0"}}' in text
