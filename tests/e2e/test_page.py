"""The web page of `kvlab serve` in a real browser: headless Chromium driven
through Selenium with Debian's chromedriver (server started by run.sh; URL in
KVLAB_E2E_URL). KVLAB_E2E_SCREENSHOT=docs/img/web-page.png also saves a
screenshot of the page after the simulation and the race,
KVLAB_E2E_LOOP_SCREENSHOT=docs/img/web-loop.png one of the loop section and
KVLAB_E2E_LAYOUT_SCREENSHOT=docs/img/web-layout.png one of a simulation over
two devices and KVLAB_E2E_SERVE_SCREENSHOT=docs/img/web-serve.png one of the
serving-load panel."""
import os
import time

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

URL = os.environ.get("KVLAB_E2E_URL", "http://127.0.0.1:8080")
CHROMEDRIVER = "/usr/bin/chromedriver"  # Debian's chromium-driver, matched to its chromium
SCREENSHOT = os.environ.get("KVLAB_E2E_SCREENSHOT")
LOOP_SCREENSHOT = os.environ.get("KVLAB_E2E_LOOP_SCREENSHOT")
LAYOUT_SCREENSHOT = os.environ.get("KVLAB_E2E_LAYOUT_SCREENSHOT")
SERVE_SCREENSHOT = os.environ.get("KVLAB_E2E_SERVE_SCREENSHOT")
ACCENT, CONTRAST = (0x1B, 0x6F, 0xB5), (0xC2, 0x41, 0x0C)  # style.css: KV cache, no KV cache


@pytest.fixture(scope="module")
def page():
    # Required, not optional: scripts/install-deps.sh installs chromium and chromium-driver.
    assert os.path.exists(CHROMEDRIVER), f"{CHROMEDRIVER} is missing: run scripts/install-deps.sh"
    opts = webdriver.ChromeOptions()
    opts.add_argument("--headless=new")
    opts.add_argument("--no-sandbox")  # Chromium refuses its sandbox when run as root (CI containers)
    opts.add_argument("--disable-dev-shm-usage")  # containers often have a tiny /dev/shm
    opts.add_argument("--window-size=1100,1000")
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)
    try:
        driver.get(URL + "/")
        wait(driver, lambda d: "Serving" in d.find_element(By.ID, "server-info").text)
        wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#sim-model option"))
        yield driver
    finally:
        driver.quit()


def wait(driver, condition, timeout=120):
    return WebDriverWait(driver, timeout, poll_frequency=0.2).until(condition)


def text(driver, element_id):
    return driver.find_element(By.ID, element_id).text


def fill(driver, element_id, value):
    e = driver.find_element(By.ID, element_id)
    e.clear()
    e.send_keys(value)


def series(driver, chart):
    """[[{x, y}...] of the KV cache, ... without] of one of the page's charts."""
    return driver.execute_script(f"return kvlab.charts.{chart}.data.datasets.map(d => d.data)")


def pixels_of(driver, canvas_id, rgb):
    """How many pixels of a canvas are exactly the colour `rgb`."""
    return driver.execute_script("""
        const [id, r, g, b] = arguments;
        const c = document.getElementById(id);
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0;
        for (let i = 0; i < d.length; i += 4) n += d[i] === r && d[i + 1] === g && d[i + 2] === b && d[i + 3] === 255;
        return n;""", canvas_id, *rgb)


def screenshot_colours(driver, element):
    """An element's screenshot, decoded by the browser: the share of pixels
    unlike its top-left corner, the distinct colours, and which of the two
    modes' colours it shows."""
    return driver.execute_async_script("""
        const [png, accent, contrast, done] = arguments;
        const img = new Image();
        img.onload = () => {
            const c = document.createElement('canvas');
            c.width = img.width; c.height = img.height;
            const g = c.getContext('2d');
            g.drawImage(img, 0, 0);
            const d = g.getImageData(0, 0, c.width, c.height).data;
            const same = (i, rgb) => d[i] === rgb[0] && d[i + 1] === rgb[1] && d[i + 2] === rgb[2];
            const bg = [d[0], d[1], d[2]];
            const colours = new Set();
            let other = 0, hasAccent = false, hasContrast = false;
            for (let i = 0; i < d.length; i += 4) {
                other += !same(i, bg);
                colours.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
                hasAccent = hasAccent || same(i, accent);
                hasContrast = hasContrast || same(i, contrast);
            }
            done({share: other / (d.length / 4), colours: colours.size, accent: hasAccent, contrast: hasContrast});
        };
        img.src = 'data:image/png;base64,' + png;""", element.screenshot_as_base64, list(ACCENT), list(CONTRAST))


def save_section(driver, section_id, path):
    """A screenshot of one whole section: the window made tall enough first."""
    driver.set_window_size(1100, 2600)
    time.sleep(0.5)  # the charts resize to the new window
    driver.find_element(By.ID, section_id).screenshot(path)
    driver.set_window_size(1100, 1000)


def test_chart_library_loaded(page):
    assert page.execute_script("return typeof Chart") == "function"
    assert not page.find_element(By.ID, "chart-missing").is_displayed()


def test_run_simulation(page):
    assert page.find_element(By.ID, "sim-model").get_attribute("value") == "llama-3.1-8b"
    assert page.find_element(By.ID, "sim-hw").get_attribute("value") == "h100"
    page.find_element(By.ID, "sim-run").click()
    # 2048 steps are drawn as 600 points per mode, over about a second.
    wait(page, lambda d: [len(s) for s in series(d, "sim")] == [600, 600])
    cached, naive = series(page, "sim")
    assert cached[0]["x"] == naive[0]["x"] == 128
    assert cached[-1]["x"] == naive[-1]["x"] == 128 + 2047
    # The lesson: the same speed at the start, then the no-cache curve falls away.
    assert abs(cached[0]["y"] - naive[0]["y"]) < 0.05 * cached[0]["y"]
    assert naive[-1]["y"] < cached[-1]["y"] / 5
    assert "no KV cache" in text(page, "sim-summary") and "compute-bound" in text(page, "sim-summary")


def test_autoregressive_loop_and_quadratic_trap(page):
    # The generated chips as they arrive: the input must grow one token at a time.
    page.execute_script("""
        window.loopSizes = [];
        new MutationObserver(() => window.loopSizes.push(
            document.querySelectorAll('#loop-input .tok.generated').length)).observe(
            document.getElementById('loop-input'), {childList: true});""")
    n = 24
    fill(page, "loop-n", str(n))
    page.find_element(By.ID, "loop-run").click()
    wait(page, lambda d: text(d, "loop-status") in ("Done.",) or "failed" in text(d, "loop-status"))
    assert text(page, "loop-status") == "Done.", text(page, "loop-status")

    # The loop: the prompt, then the n generated tokens, the last one highlighted.
    prompt = page.execute_script("return kvlab.loop.prompt.length")
    chips = page.find_elements(By.CSS_SELECTOR, "#loop-input .tok")
    assert len(chips) == prompt + n
    assert len(page.find_elements(By.CSS_SELECTOR, "#loop-input .tok.generated")) == n
    newest = page.find_elements(By.CSS_SELECTOR, "#loop-input .newest")
    assert len(newest) == 1 and newest[0] == chips[-1]
    sizes = [k for k in page.execute_script("return window.loopSizes") if k > 0]
    # One token per event as the server streams (two may share a DOM callback).
    assert sizes == sorted(sizes) and sizes[-1] == n and len(set(sizes)) > n // 2, sizes
    assert text(page, "loop-step").startswith(f"Step {n} of {n}:") and "ms" in text(page, "loop-step")

    # What the server counted is what the panels draw: rows first_row .. end-1,
    # row r attending to r + 1 positions (causal; SmolLM2 has no local layers).
    events = page.execute_script("return kvlab.loop.events")
    assert [(e["mode"], e["index"]) for e in events] == [(m, i) for i in range(n) for m in ("cached", "no_cache")]
    for e in events:
        w = e["work"]
        end = w["first_row"] + w["rows"]
        assert w["attended"] == sum(r + 1 for r in range(w["first_row"], end)), e
        assert end == e["position"]  # the pass ends at the token that makes this output
        if e["mode"] == "no_cache" or e["index"] == 0:
            assert w["first_row"] == 0  # the prefill, or a recompute of everything
        else:
            assert w["rows"] == 1 and w["first_row"] == e["position"] - 1  # one new row
        assert w["attention_flops"] > 0 and w["kv_bytes"] > 0 and w["weight_bytes"] > 0
    cached = [e["work"] for e in events if e["mode"] == "cached"]
    naive = [e["work"] for e in events if e["mode"] == "no_cache"]
    # Every forward pass reads the weights once: one pass per step either way at this size.
    assert [w["weight_bytes"] for w in cached] == [w["weight_bytes"] for w in naive]
    assert sum(w["kv_bytes"] for w in naive) > 4 * sum(w["kv_bytes"] for w in cached)

    # Drawn to scale: the last step's cells, L of them with the cache and
    # L(L+1)/2 without, each the same whole-pixel square.
    L = prompt + n - 1
    cell = page.execute_script("return kvlab.loop.cell")
    assert cell >= 1
    assert pixels_of(page, "trap-cached", ACCENT) == cell * cell * L
    assert pixels_of(page, "trap-no_cache", CONTRAST) == cell * cell * L * (L + 1) // 2
    table = page.find_element(By.ID, "trap-table").text
    assert f"{sum(w['rows'] for w in naive):,}" in table
    assert "identical tokens" in text(page, "trap-summary")

    shot = screenshot_colours(page, page.find_element(By.ID, "loop"))
    assert shot["share"] > 0.05 and shot["colours"] > 20, shot
    assert shot["accent"] and shot["contrast"], shot
    if LOOP_SCREENSHOT:
        save_section(page, "loop", LOOP_SCREENSHOT)


def test_live_race(page):
    fill(page, "race-n", "4")  # the no-cache mode is the slow one
    page.find_element(By.ID, "race-run").click()
    wait(page, lambda d: "identical tokens" in text(d, "race-summary") or "failed" in text(d, "race-status"))
    assert "Both modes produced identical tokens" in text(page, "race-summary"), text(page, "race-status")
    cached, naive = series(page, "race")
    # The first token of each mode is its TTFT, reported in the table, not plotted.
    assert len(cached) == len(naive) == 3
    assert [p["x"] for p in cached] == [p["x"] for p in naive]
    assert all(p["y"] > 0 for p in cached + naive)
    rows = page.find_elements(By.CSS_SELECTOR, "#race-table tbody tr")
    assert [r.find_elements(By.TAG_NAME, "td")[0].text for r in rows] == ["4", "4"]
    assert text(page, "race-text")
    if SCREENSHOT:  # the simulation and a race long enough to show the no-cache latency growing
        fill(page, "race-n", "48")
        page.find_element(By.ID, "race-run").click()
        wait(page, lambda d: "identical tokens" in text(d, "race-summary") or "failed" in text(d, "race-status"))
        page.set_window_size(1100, 2250)
        page.execute_script("document.getElementById('simulate').scrollIntoView()")
        time.sleep(0.5)  # the charts resize to the new window
        page.save_screenshot(SCREENSHOT)
        page.set_window_size(1100, 1000)


def test_simulation_layout(page):
    """The tensor-parallel control changes what each device must hold: a 70B in
    bf16 does not fit one H100, and does over two, which then pay for the link."""
    Select(page.find_element(By.ID, "sim-model")).select_by_value("llama-3.1-70b")
    fill(page, "sim-gen", "256")
    fit = lambda d: text(d, "sim-fit-verdict") if d.find_elements(By.ID, "sim-fit-verdict") else ""
    # How far the weights reach past the usable-memory mark on the bar, in pixels.
    overflow = lambda: page.execute_script("""
        const part = (cls) => document.querySelector('#sim-fit-bar .' + cls).getBoundingClientRect();
        return part('weights').right - part('usable').right;""")
    layouts = {}
    for tp in ("1", "2"):
        Select(page.find_element(By.ID, "sim-tp")).select_by_value(tp)
        page.execute_script("document.getElementById('sim-fit').replaceChildren()")
        page.find_element(By.ID, "sim-run").click()
        wait(page, lambda d: fit(d) or "failed" in text(d, "sim-status"))
        wait(page, lambda d: d.find_element(By.ID, "sim-run").is_enabled())  # the curves are drawn
        layouts[tp] = (fit(page), overflow(), page.find_elements(By.ID, "sim-link-time"))
    one, two = layouts["1"], layouts["2"]
    assert one[0].startswith("One device") and one[0].endswith("does not fit."), one[0]
    assert two[0].startswith("Each of 2 devices (tensor parallel 2") and two[0].endswith("fits."), two[0]
    assert two[0].count("does not") == 0
    assert one[1] > 100 and two[1] <= 0  # the bar: the weights alone overflow one device, not two
    assert not one[2] and "On the links" in two[2][0].text
    if LAYOUT_SCREENSHOT:
        save_section(page, "simulate", LAYOUT_SCREENSHOT)
    Select(page.find_element(By.ID, "sim-model")).select_by_value("llama-3.1-8b")
    Select(page.find_element(By.ID, "sim-tp")).select_by_value("1")
    fill(page, "sim-gen", "2048")


def run_serve_load(page, **fields):
    """Fills the serving-load form (ids serve-<name>) and runs it: the sweep
    [{clients, serve}], and the queue chart's running and waiting series."""
    for name, value in fields.items():
        fill(page, f"serve-{name}", str(value))
    page.execute_script("kvlab.serve = null")
    page.find_element(By.ID, "serve-run").click()
    wait(page, lambda d: d.execute_script("return kvlab.serve !== null") or "failed" in text(d, "serve-status"))
    assert "failed" not in text(page, "serve-status"), text(page, "serve-status")
    running, waiting = ([p["y"] for p in s] for s in series(page, "queue"))
    return page.execute_script("return kvlab.serve"), running, waiting


def test_serving_load(page):
    """The percentiles are charted from one client to the chosen load; more
    clients than slots queue; clients started together share prefill passes,
    and a ramp keeps them apart."""
    sweep, running, waiting = run_serve_load(page, clients=8, requests=64, prompt=2048, output=128, parallel=32,
                                             chunk=4096, target=0, ramp=0)
    assert [x["clients"] for x in sweep] == [1, 2, 4, 8]
    few = sweep[-1]["serve"]
    assert few["completed"] == 64 and max(running) == 8 and max(waiting) == 0
    ttft_p50, ttft_p99, itl_p50, itl_p99 = series(page, "percentiles")
    assert [p["x"] for p in ttft_p50] == [1, 2, 4, 8]
    assert [p["y"] for p in itl_p50] == [x["serve"]["itl_ms"]["p50"] for x in sweep]
    assert all(a["y"] <= b["y"] for a, b in zip(ttft_p50, ttft_p99))
    assert itl_p50[-1]["y"] > itl_p50[0]["y"]  # a pass of 8 rows takes longer than a pass of one
    rows = page.find_elements(By.CSS_SELECTOR, "#serve-summary tbody tr")
    assert [r.find_element(By.TAG_NAME, "th").text for r in rows] == [
        "time to first token", "inter-token latency", "end to end"]
    assert "8 clients started together" in text(page, "serve-status")

    sweep, running, waiting = run_serve_load(page, clients=64)
    many = sweep[-1]["serve"]
    assert max(running) == 32 and max(waiting) > 0  # the slots are full and the rest queue
    if SERVE_SCREENSHOT:
        save_section(page, "serve-load", SERVE_SCREENSHOT)
    assert many["throughput_tok_s"] > 1.5 * few["throughput_tok_s"]
    assert many["ttft_ms"]["p50"] > few["ttft_ms"]["p50"]

    ramp = few["e2e_ms"]["p50"] / 1000
    sweep, _, _ = run_serve_load(page, clients=8, ramp=f"{ramp:.3f}")
    assert sweep[-1]["serve"]["ttft_ms"]["p50"] < 0.75 * few["ttft_ms"]["p50"]

    fill(page, "serve-prompt", "9:3")
    page.find_element(By.ID, "serve-run").click()
    wait(page, lambda d: "failed" in text(d, "serve-status"))
    assert "LO above HI" in text(page, "serve-status")
    fill(page, "serve-prompt", "512")
    fill(page, "serve-ramp", "0")
    fill(page, "serve-target", "auto")


def test_phases(page):
    fill(page, "phases-n", "8")
    page.find_element(By.ID, "phases-run").click()
    wait(page, lambda d: "TTFT" in text(d, "phases-status") or "failed" in text(d, "phases-status"))
    assert "TTFT" in text(page, "phases-status"), text(page, "phases-status")
    segments = page.find_elements(By.CSS_SELECTOR, "#phases-timeline .seg")
    assert segments and "prefill" in segments[0].get_attribute("class")
    verdicts = text(page, "phases-verdicts")
    assert "prefill" in verdicts
    # With a probe profile each phase gets a verdict; without one, the page says how to get it.
    assert "bound" in verdicts or "kvlab probe" in verdicts


def test_diagnose(page):
    fill(page, "diag-ttft", "50")
    fill(page, "diag-tps", "2")
    fill(page, "diag-answer", "Decode struggles: it is memory-bandwidth bound, so buy faster memory, not more FLOPS.")
    page.find_element(By.ID, "diag-run").click()
    wait(page, lambda d: d.find_elements(By.CSS_SELECTOR, "#diag-feedback li") or "failed" in text(d, "diag-status"))
    feedback = text(page, "diag-feedback")
    assert "Phase: right" in feedback and "Limiting resource: right" in feedback, feedback
    assert "3 / 3" in text(page, "diag-grade")
    assert "Struggling phase: decode" in text(page, "diag-result")


def test_chat_streams(page):
    # Counts the DOM updates of the conversation: a streamed reply arrives in several.
    page.execute_script("""
        window.chatUpdates = 0;
        new MutationObserver(() => window.chatUpdates++).observe(
            document.getElementById('chat-log'), {subtree: true, childList: true, characterData: true});""")
    fill(page, "chat-max", "24")
    fill(page, "chat-temp", "0")
    fill(page, "chat-input", "Name three colours.")
    page.find_element(By.ID, "chat-send").click()
    meta = lambda d: d.find_elements(By.CSS_SELECTOR, ".msg.assistant .meta")
    wait(page, lambda d: meta(d) and meta(d)[-1].text)
    assert "TTFT" in meta(page)[-1].text and "tok/s" in meta(page)[-1].text, meta(page)[-1].text
    assert page.find_elements(By.CSS_SELECTOR, ".msg.assistant .text")[-1].text
    assert page.execute_script("return window.chatUpdates") > 5


def test_page_without_chart_library(page):
    # As if libjs-chart.js were not installed: the page loads, says so, and still simulates.
    page.execute_cdp_cmd("Network.enable", {})
    page.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["*/static/chart.js"]})
    try:
        page.get(URL + "/")
        wait(page, lambda d: d.find_element(By.ID, "chart-missing").is_displayed())
        assert "chart library is missing" in text(page, "chart-missing")
        wait(page, lambda d: d.find_elements(By.CSS_SELECTOR, "#sim-model option"))
        page.find_element(By.ID, "sim-run").click()
        wait(page, lambda d: "average tok/s" in text(d, "sim-summary") or "failed" in text(d, "sim-status"))
        assert "average tok/s" in text(page, "sim-summary")
    finally:
        page.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})
