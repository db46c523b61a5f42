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

import pytest
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

        # 6. When it ends, open its report: the verdict banner, the tiles, the tables and the
        # plots, every figure as the result JSON has it, nothing wider than 1280 px.
        page.locator("#open-report").click(timeout=20000)
        view = page.locator(".run-view")
        expect(view.locator("pre.summary")).to_contain_text("schedule:")
        expect(view.locator("pre.summary")).to_contain_text("beta")
        check_report(page, view, server, shots)
        assert view.locator(".downloads a", has_text="result.json").count() == 1
        # The session's server may have run others' tests first: this run's id, and the next.
        first = int(view.get_attribute("data-run") or "0")
        second = first + 1

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
        exp_id = detail.get_attribute("data-experiment")
        exp = page.evaluate(f"async () => (await (await fetch('/api/experiments/{exp_id}')).json()).result")
        assert len(exp["trials"]) >= 2, f"expected the sweep's trials in its result; got {exp.get('trials')}"
        expect(detail.locator(".report-table.trials tbody tr")).to_have_count(len(exp["trials"]))
        page.wait_for_function("() => document.querySelectorAll('.exp-view .report-plot .uplot').length == 2")
        page.screenshot(path=str(shots / "7-experiment.png"), full_page=True)

        # 7b. MLRsearch from its preset: the goals' table leads the report, with the figures
        # of the result, and the trials' loads are plotted by goal. The direct link keeps up
        # with 20 kframes/s, so each goal ends at the maximum load.
        detail, exp_id, exp = run_preset(page, "mlrsearch", ['method = "mlrsearch"', f'iface = "{testbed.tx}"'],
                                         {"max_rate_pps = 50000": "max_rate_pps = 20000"}, exp_id)
        goals = exp["mlrsearch"]["goals"]
        rows = detail.locator(".report-table.mlr-goals tbody tr")
        expect(rows).to_have_count(len(goals))
        for k, g in enumerate(goals):
            v = g["conditional_throughput_pps"]
            want = "" if v is None else str(v).removesuffix(".0")
            cell = rows.nth(k).locator("td").nth(2)
            assert cell.get_attribute("data-v") == want, f"expected {g['name']}'s conditional throughput {v} in the table; got {cell.get_attribute('data-v')}"
            # A goal is met, or the search stopped because a trial's sender fell behind in
            # every attempt, which its summary says.
            assert g["met"] or any("sender fell behind in every attempt" in w for w in exp["warnings"]), (g, exp["warnings"])
        expect(detail.locator(".report-table.mlr-latency tbody tr")).to_have_count(len(exp["mlrsearch"].get("latency", [])))
        expect(detail.locator("pre.summary")).to_contain_text("MLRsearch (RFC 9971)")
        page.wait_for_function("() => document.querySelectorAll('.exp-view .report-plot .uplot').length == 3")
        page.screenshot(path=str(shots / "7b-mlrsearch.png"), full_page=True)

        # 7c. The same both ways at once: each direction's row at each goal's bound and each
        # latency fraction, with its loss and percentiles from the result.
        detail, exp_id, exp = run_preset(page, "mlrsearch-bidir", ['pairs = "bidirectional"', f'iface = "{testbed.rx}"'],
                                         {"max_rate_pps = 100000": "max_rate_pps = 20000"}, exp_id)
        want = [(d["name"], a) for d in exp["directions"] for a in d["at"]]
        stopped = any("sender fell behind in every attempt" in w for w in exp["warnings"])
        assert len(exp["directions"]) == 2 and (want or stopped), (exp["directions"], exp["warnings"])
        rows = detail.locator(".report-table.directions tbody tr")
        expect(rows).to_have_count(len(want))
        for k, (name, a) in enumerate(want):
            cells = rows.nth(k).locator("td")
            assert cells.nth(0).get_attribute("data-v") == name, (k, name)
            assert cells.nth(5).get_attribute("data-v") == str(a["loss_ratio"]).removesuffix(".0"), (k, a)
        expect(detail.locator("pre.summary")).to_contain_text("by direction")
        expect(detail.locator(".report-table.mlr-latency")).to_have_count(0)
        page.screenshot(path=str(shots / "7c-mlrsearch-bidir.png"), full_page=True)

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
        expect(page.locator("#run-state")).to_contain_text(f"run {second}", timeout=10000)
        page.locator("#open-report").click(timeout=20000)
        expect(page.locator(".run-view h2")).to_contain_text(f"Run {second}")
        expect(page.locator(".run-view pre.summary")).to_contain_text("calibration")
        expect(page.locator('.run-view .banner [data-key="calibration"]')).to_contain_text("latency offset")
        # At 1280 px the Runs list keeps its schedule column: whole, or in its own box that
        # scrolls, never cut off by the page.
        page.set_viewport_size({"width": 1280, "height": 800})
        fits = page.evaluate("""() => {
            const box = document.querySelector('#tab-history .runs-box'), th = document.querySelector('#runs thead th:last-child');
            const b = box.getBoundingClientRect(), t = th.getBoundingClientRect();
            return { inside: t.right <= b.right + 1, scrolls: box.scrollWidth > box.clientWidth, boxRight: b.right,
                     shown: b.width > 0 && t.width > 0, vw: document.documentElement.clientWidth };
        }""")
        assert fits["shown"] and (fits["inside"] or fits["scrolls"]) and fits["boxRight"] <= fits["vw"] + 1, \
            f"expected the runs list's schedule column inside its box, or the box to scroll, within the 1280 px page; got {fits}"
        page.locator(f'#runs tbody tr[data-id="{first}"] .pick').check()
        page.locator(f'#runs tbody tr[data-id="{second}"] .pick').check()
        page.click("#compare")
        table = page.locator(".compare-table")
        expect(table.locator("thead th")).to_have_count(3)
        expect(table).to_contain_text("latency p99 (µs)")
        expect(page.locator(".compare .run-view")).to_have_count(2)
        # The second run's figures against the first's, from their results, and both CDFs.
        results = [page.evaluate(f"async () => (await (await fetch('/api/runs/{i}')).json()).result") for i in (first, second)]
        want = [tile_values(r) for r in results]
        for key in ("sent", "received", "latency_p99", "lateness_p99"):
            got = page.locator(f'.compare-tiles .tile[data-key="{key}"]').get_attribute("data-diff")
            assert got not in (None, "") and float(got) == pytest.approx(want[1][key] - want[0][key], rel=1e-9, abs=1e-9), \
                f"expected the {key} difference {want[1][key] - want[0][key]} (run {second} - run {first}); got {got}"
        expect(page.locator('.report-plot[data-key="compare-ccdf"] .u-legend .u-series')).to_have_count(3)
        page.screenshot(path=str(shots / "9-compare.png"), full_page=True)
        browser.close()
    assert errors == [], f"expected no JavaScript errors on the page; got {errors}"


def run_preset(page: Any, preset: str, holds: List[str], changes: dict, previous: str | None) -> tuple:  # type: ignore[type-arg]
    """Runs the experiment preset `preset` (its TOML must hold each of `holds`) with `changes`
    made to its TOML and 0.5 s final trials, and waits for it to finish: the report shown is
    experiment `previous`'s until this one's ends. Returns its view, its id and its result."""
    page.select_option("#exp-preset", preset)
    text = page.locator("#exp-toml").input_value()
    assert all(h in text for h in holds), f"expected {holds} in the preset {preset!r}; got {text}"
    for old, new in {**changes, "duration_s = 1\n": "duration_s = 0.5\n"}.items():
        text = text.replace(old, new)
    page.fill("#exp-toml", text)
    page.click("#exp-start")
    detail = page.locator(f'.exp-view:not([data-experiment="{previous}"])')
    expect(detail).to_have_count(1, timeout=60000)
    expect(page.locator("#exp-state")).to_contain_text("finished")
    exp_id = detail.get_attribute("data-experiment")
    exp = page.evaluate(f"async () => (await (await fetch('/api/experiments/{exp_id}')).json()).result")
    return detail, exp_id, exp


def tile_values(result: dict) -> dict:  # type: ignore[type-arg]
    """Each tile's number, computed here from the result JSON as the test reads it."""
    rs = (result.get("rx") or {}).get("streams") or []
    lat = [s["latency"] for s in rs if s.get("latency")]
    ia = [s["interarrival"] for s in rs if s.get("interarrival")]

    def top(xs: list) -> object:  # type: ignore[type-arg]
        xs = [x for x in xs if isinstance(x, (int, float))]
        return max(xs) if xs else None

    us = lambda v: None if v is None else v / 1000  # noqa: E731
    return {
        "sent": result["sent_frames"],
        "received": sum(s["rx_frames"] for s in rs),
        "lost": sum(s["lost_vs_tx"] for s in rs),
        "reordered": sum(s["seq"]["reordered"] for s in rs),
        "duplicated": sum(s["seq"]["duplicated"] for s in rs),
        "longest_outage": (top([s["loss_episodes"]["longest_ns"] for s in rs]) or 0) / 1e6,
        "achieved_pps": result["achieved_pps"],
        "rate_error_ppm": top([abs(s["rate_error_rel"]) * 1e6 for s in result["streams"] if s.get("rate_error_rel") is not None]),
        "latency_p50": us(top([l["percentiles_ns"]["p50"] for l in lat])),
        "latency_p99": us(top([l["percentiles_ns"]["p99"] for l in lat])),
        "latency_p99_9999": us(top([l["percentiles_ns"]["p99_9999"] for l in lat])),
        "latency_max": us(top([l["max_ns"] for l in lat])),
        "lateness_p99": result["lateness"]["p99_ns"],
        "interarrival_err_p50": top([i["abs_err_p50_ns"] for i in ia]),
        "microburst_pps": top([s["rate_jitter"][0]["max_pps"] for s in rs if s.get("rate_jitter")]),
    }


def check_report(page: Any, view: Any, server: Server, shots: Path) -> None:
    """The report's banner says what the verdict says, each tile's number equals the result
    JSON's, nothing overflows at 1280x800, and a plot gives a value on hover."""
    page.set_viewport_size({"width": 1280, "height": 800})
    run_id = view.get_attribute("data-run")
    result = page.evaluate(f"async () => (await (await fetch('/api/runs/{run_id}')).json()).result")
    verdict = result["verdict"]
    banner = view.locator(".banner")
    expect(banner).to_have_attribute("data-schedule", verdict["schedule"])
    expect(banner.locator(".banner-title")).to_have_text(f"schedule: {verdict['schedule']}")
    for cause in verdict.get("causes", []):
        expect(banner.locator(".causes")).to_contain_text(cause[:60])
    expect(banner.locator('[data-key="measurement"]')).to_contain_text(result["rx"]["verdict"]["measurement"])
    expect(banner.locator('[data-key="calibration"]')).to_have_text("calibration: none")
    for key, want in tile_values(result).items():
        got = view.locator(f'.tile[data-key="{key}"]').get_attribute("data-value")
        assert got is not None and want is not None, f"expected tile {key} with a value; got {got!r} (result: {want!r})"
        assert float(got) == pytest.approx(float(want), rel=1e-9), f"expected tile {key} = {want} (the result JSON's); got {got}"
    expect(view.locator(".report-table.tx tbody tr")).to_have_count(len(result["streams"]))
    expect(view.locator(".report-table.rx tbody tr")).to_have_count(len(result["rx"]["streams"]))
    page.wait_for_function("() => document.querySelectorAll('.run-view .report-plot .uplot').length >= 5")
    # The latency CDF is drawn from the run's decoded histogram: a point per bucket.
    hist = page.evaluate(f"async () => (await (await fetch('/api/runs/{run_id}')).json()).histograms")
    name = next(n for n, h in hist.items() if h.get("latency"))
    buckets = [b for b in hist[name]["latency"] if b[1] > 0]
    points = page.evaluate("() => document.querySelector('.run-view .report-plot[data-key=\"latency-cdf\"]')._plot.data[0].length")
    assert points == len(buckets) > 1, f"expected the CDF's points to be the {len(buckets)} latency buckets of {name}; got {points}"
    page.wait_for_timeout(300)  # the plots follow their boxes to the narrower window
    wide = page.evaluate("""() => {
        const vw = document.documentElement.clientWidth;
        const out = [...document.querySelectorAll('.run-view *')].filter(e => !e.closest('.table-box') && !e.closest('details:not([open])'))
            .filter(e => e.getBoundingClientRect().right > vw + 1).map(e => e.tagName + '.' + e.className);
        return { vw, scroll: document.documentElement.scrollWidth, out: out.slice(0, 5) };
    }""")
    assert wide["out"] == [] and wide["scroll"] <= 1280, f"expected nothing wider than the 1280 px page; got {wide}"
    over = view.locator('.report-plot[data-key="latency-ccdf"] .u-over')
    over.scroll_into_view_if_needed()
    box = over.bounding_box()
    assert box is not None, "expected the latency plot's drawing area"
    legend = view.locator('.report-plot[data-key="latency-ccdf"] .u-legend .u-series .u-value')
    values = []
    for fx in (0.02, 0.3, 0.6, 0.95):  # uPlot shows the data point nearest the cursor
        page.mouse.move(box["x"] + box["width"] * fx, box["y"] + box["height"] * 0.5, steps=4)
        values.append(legend.all_inner_texts())
    assert any(all(v.strip() not in ("", "--") for v in vs) for vs in values), f"expected values in the legend on hover over the latency plot; got {values}"
    page.screenshot(path=str(shots / "6-report.png"), full_page=True)
    page.set_viewport_size({"width": 1500, "height": 1000})
