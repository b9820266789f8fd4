"""The dashboard in a real headless browser (Debian's chromium and chromium-driver, driven by
selenium): the index loads, a link leads to a benchmark page, its plot is drawn by plotly, and
the step of the synthetic history is marked on it. A screenshot is saved (PERFGATE_SCREENSHOT
names a copy to keep, e.g. docs/dashboard.png)."""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

import pytest
from helpers import STEPPED, write_history

from perfgate.cli import main

webdriver = pytest.importorskip("selenium.webdriver", reason="needs selenium (tox -e browser)")
pytest.importorskip(
    "plotly", reason="the dashboard needs plotly: pip install 'perfgate[dashboard]'"
)
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    not (BROWSER and DRIVER),
    reason="no headless browser found: apt-get install -y chromium chromium-driver",
)


@pytest.fixture
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = BROWSER
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(DRIVER))
    yield driver
    driver.quit()


def test_index_links_to_a_page_whose_plot_marks_the_step(tmp_path, browser):
    write_history(tmp_path / "baselines", runs=24, step_at=12)
    site = tmp_path / "site"
    status = main(["dashboard", "--out", str(site), "--baselines", str(tmp_path / "baselines")],
                  out=io.StringIO(), err=io.StringIO())  # fmt: skip
    assert status == 0
    browser.get((site / "index.html").as_uri())
    browser.find_element(By.LINK_TEXT, STEPPED).click()
    wait = WebDriverWait(browser, 30)
    wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "#history .main-svg"))
    assert browser.title.startswith(f"{STEPPED} on ")  # unique: with its hardware and full id
    traces = browser.find_elements(By.CSS_SELECTOR, "#history .scatterlayer .trace")
    assert len(traces) >= 4  # band low, band high, median, fraction_of_copy
    points = browser.find_elements(By.CSS_SELECTOR, "#history .scatterlayer .point")
    assert len(points) >= 24
    labels = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#history .annotation")]
    assert any(label.startswith("step +") for label in labels), labels
    assert any("torch 2.13.0 -> 2.14.0" in label for label in labels), labels
    screenshot = tmp_path / "dashboard.png"
    assert browser.save_screenshot(str(screenshot))
    assert screenshot.stat().st_size > 20_000
    if os.environ.get("PERFGATE_SCREENSHOT"):
        shutil.copyfile(screenshot, Path(os.environ["PERFGATE_SCREENSHOT"]))
