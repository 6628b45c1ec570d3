"""The web console in a real browser: Debian's headless chromium, driven by its chromidriver through
Selenium, against a real `errtriage serve`. Each page is screenshotted at a laptop and a phone
width (under the test's temporary folder; also into $ERRTRIAGE_SCREENSHOTS when set) and the
browser's console must stay free of errors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.servers import Process

TOKEN = "console-admin-token"
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
SIZES = {"laptop": (1280, 800), "phone": (390, 844)}
SHAPE = "ledger-sync: upstream replica lag of {ms} ms exceeded the 2000 ms budget on shard s-{shard}"


def lag(ms: int, shard: int) -> dict[str, Any]:
    return {"message": SHAPE.format(ms=ms, shard=shard), "status": 503, "source": "billing"}


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.fail("chromium and chromium-driver are not installed: apt-get install chromium chromium-driver "
                    "(.ci/run does)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 f"--user-data-dir={tmp_path / 'chromium-profile'}", "--window-size=1280,800"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def console(spawn: Callable[..., Process], rules_copy: Path) -> Process:
    return spawn("--rules", str(rules_copy), ERRTRIAGE_ADMIN_TOKEN=TOKEN, ERRTRIAGE_NOTIFY_ENABLED="false")


def wait(driver: Any, condition: Callable[[Any], Any], timeout: float = 15) -> Any:
    """Until `condition` holds; an element the page re-rendered meanwhile is looked up again."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    ignored = (NoSuchElementException, StaleElementReferenceException)
    return WebDriverWait(driver, timeout, ignored_exceptions=ignored).until(condition)


def no_console_errors(driver: Any) -> None:
    errors = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
    assert errors == []


def screenshots(driver: Any, tmp_path: Path, name: str, ready: Callable[[Any], Any]) -> None:
    """Both widths, each after the page settled; every request the page made stayed on the service."""
    folder = tmp_path / "screenshots"
    folder.mkdir(exist_ok=True)
    extra = os.environ.get("ERRTRIAGE_SCREENSHOTS")
    for size, (width, height) in SIZES.items():
        driver.set_window_size(width, height)
        wait(driver, ready)
        time.sleep(0.3)  # layout after the resize
        path = folder / f"{name}-{size}.png"
        assert driver.save_screenshot(str(path)) and path.stat().st_size > 5000
        if extra:
            Path(extra).mkdir(parents=True, exist_ok=True)
            shutil.copy(path, Path(extra) / path.name)
        overflow = driver.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 1, f"{name} scrolls sideways at {width}px"
    origin = driver.execute_script("return location.origin")
    elsewhere = driver.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name).filter(n => !n.startsWith(arguments[0]))",
        origin)
    assert elsewhere == []
    driver.set_window_size(*SIZES["laptop"])


def test_playground_classifies_a_pasted_payload(browser: Any, console: Process, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    browser.get(console.url + "/")
    assert browser.current_url == console.url + "/ui/"
    payload = {"message": "Error code: 429 - {'error': {'code': 'insufficient_quota', 'message': 'You exceeded "
                          "your current quota'}}", "provider": "openai", "status": 429}
    expected = httpx.post(f"{console.url}/v1/classify", json=payload).json()
    assert (expected["class"], expected["reason"]) == ("ai_credits", "quota_exceeded")
    box = wait(browser, lambda d: d.find_element(By.ID, "payload"))
    assert browser.switch_to.active_element == box  # focused: paste and go
    box.send_keys(json.dumps(payload))
    box.send_keys(Keys.CONTROL, Keys.ENTER)
    wait(browser,
         lambda d: d.find_element(By.CSS_SELECTOR, "[data-testid=class]").text == "ai_credits / quota_exceeded")
    wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, "[data-testid=route]").text == "ai-credits-user")
    wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, "#explain-table tr.won td").text == expected["rule"])

    box.clear()
    box.send_keys("psycopg.errors.QueryCanceled: canceling statement due to user request")
    browser.find_element(By.ID, "classify-button").click()
    wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, "[data-testid=class]").text == "aborted / cancelled")
    screenshots(browser, tmp_path, "playground", lambda d: d.find_element(By.CSS_SELECTOR, "[data-testid=class]"))
    no_console_errors(browser)


def test_rules_page_lists_the_shipped_rules(browser: Any, console: Process, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    httpx.post(f"{console.url}/v1/errors", json={"message": "Rate limit exceeded", "status": 429, "provider": "openai"})
    loaded = httpx.get(f"{console.url}/v1/rules").json()
    browser.get(console.url + "/ui/#rules")
    rows = wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#rules-table tbody tr"))
    assert len(rows) == len(loaded["rules"]) > 50
    ids = [row.find_element(By.CSS_SELECTOR, "td").text for row in rows]
    assert ids == [rule["id"] for rule in loaded["rules"]]
    matched = [r for r in loaded["rules"] if r["matches"]]
    assert [r["id"] for r in matched] == ["ai-status-rate-limited"]
    assert len(browser.find_elements(By.CSS_SELECTOR, "#rules-table tr.dead")) == len(loaded["rules"]) - 1
    search = browser.find_element(By.CSS_SELECTOR, "input[type=search]")
    search.send_keys("rate-limited")
    wait(browser, lambda d: all("rate-limited" in r.text
                                for r in d.find_elements(By.CSS_SELECTOR, "#rules-table tbody tr")))
    search.clear()
    screenshots(browser, tmp_path, "rules", lambda d: d.find_elements(By.CSS_SELECTOR, "#rules-table tbody tr"))
    no_console_errors(browser)


def test_unknowns_inbox_drafts_a_rule_that_check_accepts_and_that_classifies(
        browser: Any, console: Process, rules_copy: Path, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    for ms, shard in ((5321, 17), (12, 3), (907, 41)):
        assert httpx.post(f"{console.url}/v1/errors", json=lag(ms, shard)).json()["decided_by"] == "none"
    browser.get(console.url + "/ui/#unknowns")
    token_box = wait(browser, lambda d: d.find_element(By.ID, "token-input"))
    token_box.send_keys("wrong-token\n")
    wait(browser, lambda d: "valid bearer token" in d.find_element(By.CSS_SELECTOR, ".token-form .error").text)
    assert browser.execute_script("return sessionStorage.getItem('errtriage.adminToken')") is None
    refused = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]  # and clears the log
    assert len(refused) == 1 and "/v1/unknowns" in refused[0] and "401" in refused[0]  # the wrong token, nothing else
    browser.find_element(By.ID, "token-input").send_keys(TOKEN + "\n")
    groups = wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "article.group"))
    assert len(groups) == 1
    assert groups[0].find_element(By.CSS_SELECTOR, ".count").text == "3"
    assert browser.execute_script("return localStorage.length") == 0  # the token is in sessionStorage only
    copy = groups[0].find_element(By.CSS_SELECTOR, "button.copy")
    copy.click()
    wait(browser, lambda d: copy.get_attribute("data-copied") == "yes")
    draft = groups[0].find_element(By.CSS_SELECTOR, "pre.draft").text
    screenshots(browser, tmp_path, "unknowns", lambda d: d.find_elements(By.CSS_SELECTOR, "article.group"))
    no_console_errors(browser)

    (rules_copy / "classes" / "85-drafts.yaml").write_text(draft + "\n")
    check = subprocess.run([sys.executable, "-m", "service", "check", str(rules_copy)], capture_output=True,
                           text=True, timeout=300)
    assert check.returncode == 0, check.stderr + check.stdout
    reloaded = httpx.post(f"{console.url}/v1/rules/reload", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)
    assert reloaded.status_code == 200, reloaded.text
    answer = httpx.post(f"{console.url}/v1/errors", json=lag(66, 8)).json()
    assert answer["decided_by"] == "rule" and answer["rule"].startswith("draft-ledger-sync")


def test_docs_work_air_gapped(browser: Any, console: Process, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    html = httpx.get(f"{console.url}/docs").text
    assert "cdn" not in html.lower() and "/docs/assets/swagger-ui-bundle.js" in html
    browser.get(console.url + "/docs")
    title = wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, ".swagger-ui .info .title"))
    assert title.text.startswith("errtriage")
    assert wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".opblock-summary-path[data-path='/v1/unknowns']"))
    screenshots(browser, tmp_path, "docs", lambda d: d.find_element(By.CSS_SELECTOR, ".swagger-ui .info .title"))
    no_console_errors(browser)


def test_console_files_are_served_hardened(console: Process) -> None:
    page = httpx.get(console.url + "/ui/")
    assert page.status_code == 200 and "<title>errtriage console</title>" in page.text
    policy = page.headers["content-security-policy"]
    assert "default-src 'self'" in policy and "unsafe-inline" not in policy
    assert httpx.get(console.url + "/ui/console.js").headers["x-content-type-options"] == "nosniff"
    assert httpx.get(console.url + "/ui", follow_redirects=False).headers["location"] == "/ui/"
