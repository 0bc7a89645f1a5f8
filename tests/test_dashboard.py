"""The live web dashboard in a real headless Chromium (Debian's chromium + chromium-driver, selenium).

The daemon runs the fluid plant at T = 0.2 s; the page is served by the daemon itself with
uPlot vendored in the package, so it works with no network beyond loopback (checked: every
resource the page loaded came from the daemon's origin).
Set ``SCIDMZ_DASHBOARD_PNG=docs/dashboard.png`` to refresh the screenshot in the docs.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_controller import SC, Running, wait_until

from scidmz.controller.serve import ControlDaemon
from scidmz.plant import make_plant
from scidmz.policies import TrivialPolicy

webdriver = pytest.importorskip("selenium.webdriver")
pytest.importorskip("uvicorn")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER), reason="needs Debian's chromium and chromium-driver")


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Running]:
    with make_plant("fluid", SC) as p:  # compile the kernel before the real-time loop
        p.reset(0)
        p.step(50e6)
    d = ControlDaemon(make_plant("fluid", SC), TrivialPolicy(), 60e6, api="127.0.0.1:0",
                      token_file=tmp_path / "tok", log=tmp_path / "log.jsonl")
    r = Running(d, tmp_path / "log.jsonl")
    r.thread.start()
    wait_until(lambda: d.k >= 3, 30, "three periods")
    yield r
    d.stop("test over")
    r.thread.join(15)
    assert not r.thread.is_alive()
    assert not [t.name for t in threading.enumerate() if t.name.startswith("scidmz-")]


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,1000", f"--user-data-dir={tmp_path / 'chromium'}",
                # offline: no proxy, no background network; the page may only reach the daemon
                "--no-proxy-server", "--disable-background-networking"):
        opts.add_argument(arg)
    drv = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    drv.set_page_load_timeout(60)
    try:
        yield drv
    finally:
        drv.quit()


def _wait(drv: Any, cond: Any, timeout: float = 30, what: str = "the page") -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(drv, timeout, poll_frequency=0.1).until(lambda d: cond(d), f"timed out waiting for {what}")


def test_dashboard_charts_move_and_the_form_sets_the_target(daemon: Running, browser: Any,
                                                           tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    d = daemon.d
    host, port = d.api_address  # type: ignore[misc]
    origin = f"http://{host}:{port}"
    browser.get(f"{origin}/#token={d.token}")
    _wait(browser, lambda b: b.find_element(By.ID, "main").is_displayed(), what="the dashboard")
    assert browser.execute_script("return typeof uPlot") == "function"  # the vendored library ran
    # The charts move: their x data grows by at least three periods and follows the daemon's k.
    n0 = _wait(browser, lambda b: b.execute_script("return window.scidmz.charts.rates.data[0].length") or None,
               what="first points")
    k0 = browser.execute_script("return window.scidmz.since")
    _wait(browser, lambda b: b.execute_script("return window.scidmz.charts.rates.data[0].length") >= n0 + 3,
          what="three more periods on the chart")
    assert browser.execute_script("return window.scidmz.since") >= k0 + 3
    assert browser.execute_script("return window.scidmz.charts.delays.data[0].length") >= n0 + 3
    rates = browser.execute_script("return window.scidmz.charts.rates.data")
    assert all(v == 60e6 for v in rates[3][-3:])  # the target series
    assert all(v == 40e6 for v in rates[2][-3:])  # u = B_max - target (trivial policy)
    assert any(v and v > 0 for v in rates[1])  # y(t): the DTN rate
    assert browser.find_element(By.ID, "v-fallback").text == "off"
    # The form changes the daemon's target.
    box = browser.find_element(By.ID, "target-input")
    box.send_keys("35M")
    browser.find_element(By.CSS_SELECTOR, "#target-form button").click()
    wait_until(lambda: d.target == 35e6, 15, "the new target")
    _wait(browser, lambda b: "35.0 Mbit/s" in b.find_element(By.ID, "target-msg").text, what="the confirmation")
    _wait(browser, lambda b: b.find_element(By.ID, "v-target").text == "35.0 Mbit/s", what="the new target shown")
    _wait(browser, lambda b: b.execute_script(
        "const t = window.scidmz.charts.rates.data[3]; return t.length && t[t.length - 1] === 35e6"),
        what="the target on the chart")
    png = tmp_path / "dashboard.png"
    browser.save_screenshot(str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    if os.environ.get("SCIDMZ_DASHBOARD_PNG"):
        shutil.copyfile(png, os.environ["SCIDMZ_DASHBOARD_PNG"])
    # A bad target is refused with the daemon's one-line reason; the target stays.
    box.clear()
    box.send_keys("500M")
    browser.find_element(By.CSS_SELECTOR, "#target-form button").click()
    _wait(browser, lambda b: "above the bottleneck" in b.find_element(By.ID, "target-msg").text,
          what="the refusal")
    assert d.target == 35e6
    # Offline: everything the page loaded came from the daemon.
    urls = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert urls and all(u.startswith(origin) for u in urls), urls



def test_dashboard_refuses_a_wrong_token(daemon: Running, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    d = daemon.d
    host, port = d.api_address  # type: ignore[misc]
    browser.get(f"http://{host}:{port}/#token=not-the-token")
    err = _wait(browser, lambda b: b.find_element(By.ID, "auth-error") if
                b.find_element(By.ID, "auth-error").is_displayed() else None, what="the refusal")
    assert "refused" in err.text and "wrong token" in err.text
    assert not browser.find_element(By.ID, "main").is_displayed()
    # Nothing reaches the daemon without the token, even from the page's own origin.
    code = browser.execute_async_script(
        "const done = arguments[0]; fetch('/target', {method: 'POST', headers: {'Authorization': 'Bearer x',"
        " 'Content-Type': 'application/json'}, body: JSON.stringify({target: '10M'})}).then(r => done(r.status));")
    assert code == 401 and d.target == 60e6
    # Typing the right token into the form connects.
    box = browser.find_element(By.ID, "token")
    box.clear()
    box.send_keys(d.token)
    browser.find_element(By.CSS_SELECTOR, "#token-form button").click()
    _wait(browser, lambda b: b.find_element(By.ID, "main").is_displayed(), what="the dashboard after login")
