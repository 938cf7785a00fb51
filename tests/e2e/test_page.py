"""The web page of `kvlab serve` in a real browser: headless Chromium driven
through Selenium with Debian's chromedriver (server started by run.sh; URL in
KVLAB_E2E_URL). KVLAB_E2E_SCREENSHOT=docs/img/web-page.png also saves a
screenshot of the page after the simulation and the race."""
import os
import time

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

URL = os.environ.get("KVLAB_E2E_URL", "http://127.0.0.1:8080")
CHROMEDRIVER = "/usr/bin/chromedriver"  # Debian's chromium-driver, matched to its chromium
SCREENSHOT = os.environ.get("KVLAB_E2E_SCREENSHOT")


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
        page.execute_script("window.scrollTo(0, 0)")
        time.sleep(0.5)  # the charts resize to the new window
        page.save_screenshot(SCREENSHOT)
        page.set_window_size(1100, 1000)


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
