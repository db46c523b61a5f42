"""The dashboard in a real browser: Debian's headless Chromium driven by Playwright (no
browser download). It composes a two-stream profile in the form, saves it, finds it after a
reload, runs it on the testbed and watches the live charts get points, opens the finished
run's report, runs a small rate sweep from the experiments tab and opens its report, makes a
calibration, runs again with it, and compares the two runs. A screenshot is taken at each step into a directory the test prints;
any JavaScript error on the page fails the test."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any, List

from playwright.sync_api import Page, expect, sync_playwright

from conftest import REPO, Server, Testbed


def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    raise AssertionError("expected Debian's chromium on PATH; got none. Fix: run scripts/setup.sh (apt-get install chromium)")


def shots_dir() -> Path:
    d = Path(os.environ.get("GAPLESS_SCREENSHOTS", REPO / "target" / "screenshots"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def field(page: Page, stream: int, path: str) -> Any:
    return page.locator(f'[data-path="stream[{stream}].{path}"]')


def set_field(page: Page, stream: int, path: str, value: str) -> None:
    """Types into a form field and leaves it, as a user does (the form syncs on change)."""
    field(page, stream, path).fill(value)
    field(page, stream, path).dispatch_event("change")


def test_compose_save_reload_run_live_and_open_the_report(server: Server, testbed: Testbed) -> None:
    shots = shots_dir()
    print(f"\nscreenshots: {shots}")
    errors: List[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
        page.on("console", lambda m: errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)

        # 1. The dashboard opens with a new profile of one stream.
        page.goto(server.url + "/")
        expect(page.locator("#status")).to_have_text("connected")
        expect(page.locator(".stream")).to_have_count(1)
        page.screenshot(path=str(shots / "1-open.png"))

        # 2. Compose two streams in the form.
        set_field(page, 0, "name", "alpha")
        set_field(page, 0, "timing.rate_pps", "2000")
        set_field(page, 0, "timing.duration_s", "2")
        page.click("#add-stream")
        expect(page.locator(".stream")).to_have_count(2)
        set_field(page, 1, "name", "beta")
        set_field(page, 1, "template.dst_port", "5001")
        set_field(page, 1, "timing.duration_s", "2")
        page.locator('[data-stream="1"] button', has_text="Add field op").click()
        expect(page.locator("#toml")).to_have_value(re.compile(r'name = "beta"[\s\S]*field = "src_port"'))
        expect(page.locator("#check")).to_have_class("check ok")
        # A bad value is shown beside its field, with the core's message.
        set_field(page, 0, "timing.rate_pps", "-5")
        expect(page.locator("#check")).to_have_class("check bad")
        expect(page.locator(".field-error.from-check")).to_contain_text("not a positive number")
        page.screenshot(path=str(shots / "2a-invalid-field.png"))
        set_field(page, 0, "timing.rate_pps", "2000")
        expect(page.locator("#check")).to_have_class("check ok")
        page.screenshot(path=str(shots / "2-composed.png"))

        # 3. Save.
        page.fill("#profile-name", "two-streams")
        page.click("#save")
        expect(page.locator("#save-state")).to_have_text("saved")
        expect(page.locator('#profile-list li[data-name="two-streams"]')).to_have_count(1)
        page.screenshot(path=str(shots / "3-saved.png"))

        # 4. Reload, find it and open it.
        page.reload()
        expect(page.locator("#status")).to_have_text("connected")
        page.click('#profile-list li[data-name="two-streams"]')
        expect(page.locator(".stream")).to_have_count(2)
        expect(field(page, 1, "name")).to_have_value("beta")
        page.screenshot(path=str(shots / "4-reloaded.png"))

        # 5. Run it on the testbed; the live charts get points.
        page.fill("#testbed", testbed.name)
        page.click("#start")
        page.wait_for_function("() => { const c = window.gapless.state.charts.rate; return c && c.data[0].length >= 3; }", timeout=15000)
        expect(page.locator("#run-state")).to_contain_text("received")
        page.screenshot(path=str(shots / "5-live.png"))

        # 6. When it ends, open its report.
        page.locator("#open-report").click(timeout=20000)
        view = page.locator(".run-view")
        expect(view.locator("pre.summary")).to_contain_text("schedule:")
        expect(view.locator("pre.summary")).to_contain_text("beta")
        expect(view.locator(".plots img").first).to_be_visible()
        page.wait_for_function("() => [...document.querySelectorAll('.plots img')].every(i => i.complete && i.naturalWidth > 0)")
        assert view.locator(".downloads a", has_text="result.json").count() == 1
        page.screenshot(path=str(shots / "6-report.png"), full_page=True)

        # 7. An experiment: a two-point rate sweep on the testbed, its trials as they are
        # judged, then its report.
        page.click('nav .tab[data-tab="experiments"]')
        page.fill("#exp-testbed", testbed.name)
        page.locator("#exp-testbed").dispatch_event("change")
        text = page.locator("#exp-toml").input_value()
        assert f'iface = "{testbed.tx}"' in text, text
        text = text.replace("values = [5000, 10000, 20000]", "values = [2000, 4000]").replace("repetitions = 2", "repetitions = 1")
        text = text.replace("duration_s = 1\n", "duration_s = 0.5\n")
        page.fill("#exp-toml", text)
        page.click("#exp-start")
        expect(page.locator("#exp-trials tbody tr")).to_have_count(2, timeout=30000)
        expect(page.locator("#exp-state")).to_contain_text("finished", timeout=30000)
        detail = page.locator(".exp-view")
        expect(detail.locator("pre.summary")).to_contain_text("sweep")
        expect(detail.locator(".downloads a", has_text="trials.csv")).to_have_count(1)
        page.wait_for_function("() => { const i = [...document.querySelectorAll('.exp-view .plots img')]; return i.length > 0 && i.every(x => x.complete && x.naturalWidth > 0); }")
        page.screenshot(path=str(shots / "7-experiment.png"), full_page=True)

        # 8. A calibration on the testbed, then a second run that uses it; the two runs side
        # by side.
        page.click('nav .tab[data-tab="calibrations"]')
        page.fill("#cal-testbed", testbed.name)
        page.fill("#cal-duration", "1")
        page.click("#calibrate")
        expect(page.locator("#cal-result")).to_contain_text("latency offset", timeout=20000)
        expect(page.locator("#cal-list tbody tr")).to_have_count(1)
        page.screenshot(path=str(shots / "8-calibration.png"))
        page.click('nav .tab[data-tab="compose"]')
        page.select_option("#calibration", index=1)
        page.click("#start")
        expect(page.locator("#run-state")).to_contain_text("run 2", timeout=10000)
        page.locator("#open-report").click(timeout=20000)
        expect(page.locator(".run-view h2")).to_contain_text("Run 2")
        expect(page.locator(".run-view pre.summary")).to_contain_text("calibration")
        page.locator('#runs tbody tr[data-id="1"] .pick').check()
        page.locator('#runs tbody tr[data-id="2"] .pick').check()
        page.click("#compare")
        table = page.locator(".compare-table")
        expect(table.locator("thead th")).to_have_count(3)
        expect(table).to_contain_text("latency p99 (µs)")
        expect(page.locator(".compare .run-view")).to_have_count(2)
        page.screenshot(path=str(shots / "9-compare.png"), full_page=True)
        browser.close()
    assert errors == [], f"expected no JavaScript errors on the page; got {errors}"
