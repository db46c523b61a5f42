"""A hostile web page in the user's own browser (Debian's headless Chromium through
Playwright) tries to drive `gapless serve` on loopback: from a second local origin it sends
`fetch(..., {mode: "no-cors", method: "POST"})` to the dashboard API and to the OTG API, a
CORS fetch with a JSON body (which needs a preflight), and a form POST whose text/plain body is
JSON; then, as a DNS-rebound page would, it reaches the server by a name of its own. Nothing
may be created: no run, no profile, no OTG config."""

from __future__ import annotations

import http.server
import json
import ssl
import threading
import urllib.request
from typing import Any

from playwright.sync_api import sync_playwright

from conftest import Server, free_port
from test_dashboard import chromium

PROFILE = '[[stream]]\nname = "a"\nsize = 64\n[stream.timing]\nrate_pps = 1000\ncount = 10\n'


def attack_page(api: str, otg: str) -> str:
    run = json.dumps({"toml": PROFILE, "profile": "evil", "options": {"null": True}})
    cfg = json.dumps({"ports": [{"name": "p1", "location": "lo"}], "flows": []})
    # A form whose text/plain body is JSON: name = everything up to the last quote.
    name, value = run[:-2] + ', "x": "', '"}'
    return f"""<!doctype html><html><body>
<iframe name="sink"></iframe>
<form id="f" method="POST" action="{api}/api/runs" enctype="text/plain" target="sink">
<input type="hidden" name='{name}' value='{value}'></form>
<script>
const results = {{}};
async function attempt(key, url, init) {{
  try {{ const r = await fetch(url, init); results[key] = "status " + r.status + " type " + r.type; }}
  catch (e) {{ results[key] = "error " + e; }}
}}
(async () => {{
  await attempt("no-cors run", "{api}/api/runs", {{ mode: "no-cors", method: "POST", body: {json.dumps(run)} }});
  await attempt("no-cors profile", "{api}/api/profiles/evil", {{ mode: "no-cors", method: "PUT", body: {json.dumps(PROFILE)} }});
  await attempt("no-cors otg", "{otg}/config", {{ mode: "no-cors", method: "POST", body: {json.dumps(cfg)} }});
  await attempt("cors json", "{api}/api/runs", {{ method: "POST", headers: {{ "Content-Type": "application/json" }}, body: {json.dumps(run)} }});
  document.getElementById("f").submit();
  window.results = results;
  document.title = "sent";
}})();
</script></body></html>"""


class Attacker:
    """An HTTP server on another local port: the second origin, serving the attack page."""

    def __init__(self, page: str) -> None:
        body = page.encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.port = free_port()
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def get(url: str, cafile: Any = None) -> Any:
    ctx = ssl.create_default_context(cafile=str(cafile)) if cafile else None
    with urllib.request.urlopen(url, timeout=10, context=ctx) as r:
        return json.loads(r.read())


def state(s: Server) -> Any:
    return (get(s.url + "/api/runs")["runs"], get(s.url + "/api/profiles")["profiles"], get(s.otg.replace("127.0.0.1", "localhost") + "/config", s.otg_cert))


def test_a_page_from_another_origin_cannot_start_traffic(own_server: Server) -> None:
    s = own_server
    before = state(s)
    assert before == ([], [], {}), f"expected a new server to have nothing; got {before}"
    attacker = Attacker(attack_page(s.url, s.otg))
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=chromium(),
                args=["--no-sandbox", "--disable-gpu", "--host-resolver-rules=MAP rebind.test 127.0.0.1"],
            )
            # HTTPS errors are ignored so that the OTG listener's own checks answer below (a
            # real browser would first refuse its self-signed certificate).
            page = browser.new_page(ignore_https_errors=True)
            page.goto(f"http://localhost:{attacker.port}/")
            page.wait_for_function("document.title === 'sent'", timeout=15_000)
            results = page.evaluate("window.results")
            print(f"\nthe page's attempts: {results}")
            page.wait_for_timeout(500)  # the form's POST lands in its iframe
            # The preflight fails, so the CORS fetch never sends its POST.
            assert results["cors json"].startswith("error"), f"expected the CORS fetch to fail its preflight; got {results}"
            # DNS rebinding: the page's own name now points at 127.0.0.1.
            r = page.goto(f"http://rebind.test:{s.port}/api/profiles")
            assert r is not None and r.status == 421, f"expected 421 for a rebound name; got {r and r.status}"
            r = page.goto(f"https://rebind.test:{s.otg_port}/config")
            assert r is not None and r.status == 421, f"expected 421 on the OTG listener; got {r and r.status}"
            browser.close()
    finally:
        attacker.close()
    after = state(s)
    assert after == before, f"expected no run, profile or OTG config after the attack ({results}); got {after}"
    log = s.db.with_suffix(".log").read_text()
    assert "evil" not in log, f"expected nothing of the attack in the server's log; got {log}"
