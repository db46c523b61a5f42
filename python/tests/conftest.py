"""Shared helpers: the CLI binary, root checks, and a testbed of the test's own.

Tests that need root fail with a clear message without it (never skip), like the Rust
tests. The testbed is made with `gapless testbed up --name glpy` and removed after.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, List

import pytest

# The Ctrl-C tests send SIGINT to this process. A shell that starts pytest in the background
# (`cmd &` without job control) leaves SIGINT ignored, and Python then installs no handler of
# its own: the signal would be dropped and those tests would wait out their runs. Install
# Python's own handler whatever the launcher did.
signal.signal(signal.SIGINT, signal.default_int_handler)

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


def cli() -> str:
    """The gapless binary of this checkout (GAPLESS_BIN overrides): the newer of the ci build
    (scripts/setup.sh --test makes it) and the release build."""
    if os.environ.get("GAPLESS_BIN"):
        return os.environ["GAPLESS_BIN"]
    built = [p for p in (REPO / "target" / "ci" / "gapless", REPO / "target" / "release" / "gapless") if p.exists()]
    assert built, "expected a gapless binary in target/ci or target/release; got none. Fix: run scripts/setup.sh --test"
    return str(max(built, key=lambda p: p.stat().st_mtime))


def gapless_cli(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    p = subprocess.run([cli(), *args], capture_output=True, text=True, timeout=300)
    if check:
        assert p.returncode == 0, f"expected `gapless {' '.join(args)}` to exit 0; got {p.returncode}: {p.stderr}"
    return p


def require_root() -> None:
    assert os.geteuid() == 0, (
        "this test makes network namespaces and needs root (CI runs as root). "
        "Fix: run the suite as root, e.g. sudo .venv/bin/pytest"
    )


class Testbed:
    name = "glpy"
    tx, rx = "glpy-tx0", "glpy-rx0"
    tx_ns, rx_ns = "glpy-tx", "glpy-rx"


@pytest.fixture(scope="session")
def testbed() -> Iterator[Testbed]:
    require_root()
    gapless_cli("testbed", "up", "--name", Testbed.name)
    try:
        yield Testbed()
    finally:
        gapless_cli("testbed", "down", "--name", Testbed.name)


def have(tool: str) -> str:
    path = shutil.which(tool)
    assert path, f"expected {tool} on PATH; got none. Fix: run scripts/setup.sh --test"
    return path


@contextmanager
def tcpdump(netns: str, iface: str, path: Path, what: str, *opts: str, keep_all: bool = False) -> Iterator[None]:
    """tcpdump on `iface` in `netns` while the block runs, nanosecond stamps (the kernel's RX
    stamps, as the meter's); `keep_all` asserts it dropped no frame."""
    p = subprocess.Popen(["ip", "netns", "exec", netns, have("tcpdump"), "-i", iface, "--time-stamp-precision=nano", "-U",
                          *opts, "-w", str(path), what], stderr=subprocess.PIPE, text=True)
    assert p.stderr is not None
    line = p.stderr.readline()
    assert "listening" in line, f"expected tcpdump to start; got {line}"
    try:
        yield
    finally:
        settled(path)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=10)
        if keep_all:
            kept(err)


def settled(path: Path, quiet_s: float = 0.3, within_s: float = 30.0) -> None:
    """Waits until the capture file has not grown for `quiet_s`: tcpdump (`-U`, a write per
    frame) can be a second behind a busy sender on this VM, and on SIGINT it leaves what it
    has not read in its ring (counted as received, not as dropped)."""
    size, since, end = -1, time.monotonic(), time.monotonic() + within_s
    while time.monotonic() < end:
        now = path.stat().st_size if path.exists() else 0
        if now != size:
            size, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return
        time.sleep(0.05)


def kept(err: str) -> None:
    """Asserts tcpdump's own tally: nothing dropped by the kernel, and every frame the filter
    took written to the file."""
    tally = {k: int(n) for n, k in re.findall(r"^(\d+) packets? (captured|received by filter|dropped by kernel)$", err, re.M)}
    assert tally.get("dropped by kernel") == 0, f"expected tcpdump to drop no frame; got {err}"
    assert tally.get("captured") == tally.get("received by filter"), f"expected tcpdump to write every frame its filter took; got {err}"


def stream(name: str = "a", rate: float = 100_000, count: int = 1000, **extra: object) -> dict:  # type: ignore[type-arg]
    s: dict = {"name": name, "size": 64, "timing": {"rate_pps": rate, "count": count}}  # type: ignore[type-arg]
    s.update(extra)
    return s


def examples_checked_alone() -> List[Path]:
    """Example profiles that compile without an interface (no `%` rate); experiment files
    (a line starting `method = `) are not profiles."""
    def experiment(p: Path) -> bool:
        return any(line.startswith("method = ") for line in p.read_text().splitlines())

    return sorted(p for p in EXAMPLES.glob("*.toml") if p.name != "link_pct.toml" and not experiment(p))


# Listening ports for the servers the tests start: taken in turn from a range below the
# kernel's ephemeral ports (ip_local_port_range starts at 32768) and apart from the Rust tests'
# (20000-32000, tests/common local_port), so no two listeners of one run
# get the same port (binding port 0 and closing it can hand the same port out twice, as it did
# to a dashboard and a gRPC listener), and no outgoing connection holds one in between.
PORT_RANGE = (10000, 20000)
_next_port = [PORT_RANGE[0] + (os.getpid() * 7919) % (PORT_RANGE[1] - PORT_RANGE[0])]


def free_port() -> int:
    """A TCP port no earlier call of this run returned, and free on every address now."""
    import socket

    lo, hi = PORT_RANGE
    for _ in range(hi - lo):
        p = _next_port[0]
        _next_port[0] = lo + (p + 1 - lo) % (hi - lo)
        with socket.socket() as s:
            try:
                s.bind(("0.0.0.0", p))
            except OSError:
                continue
            return p
    raise RuntimeError(f"free_port: no free TCP port in {lo}-{hi}")


class Server:
    """A `gapless serve` process: the dashboard at `url`, the OTG API at `otg` (HTTPS with the
    self-signed certificate made at first start, as snappi's default location expects) and
    over gRPC at `grpc`, and gNMI at `gnmi` (host, port; TLS with the OTG certificate)."""

    def __init__(self, db: Path, *extra: str) -> None:
        import socket
        import ssl
        import time

        self.port, self.otg_port, self.grpc_port = free_port(), free_port(), free_port()
        self.gnmi = ("127.0.0.1", free_port())
        self.url = f"http://127.0.0.1:{self.port}"
        self.otg = f"https://127.0.0.1:{self.otg_port}"
        self.grpc = f"127.0.0.1:{self.grpc_port}"
        self.db = db
        self.log = open(db.with_suffix(".log"), "w")
        self.proc = subprocess.Popen(
            [cli(), "serve", "--listen", f"127.0.0.1:{self.port}", "--otg-listen", f"127.0.0.1:{self.otg_port}",
             "--otg-grpc-listen", self.grpc, "--gnmi-listen", f"127.0.0.1:{self.gnmi[1]}", "--db", str(db), *extra],
            stdout=self.log, stderr=subprocess.STDOUT,
        )
        t0 = time.monotonic()
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.otg_port), timeout=1).close()
                break
            except OSError:
                assert self.proc.poll() is None, f"gapless serve exited: {db.with_suffix('.log').read_text()}"
                assert time.monotonic() - t0 < 10, "expected gapless serve to listen within 10 s"
                time.sleep(0.02)

    @property
    def otg_cert(self) -> Path:
        """The OTG listener's self-signed certificate, beside the database."""
        return self.db.with_name(self.db.stem + "-otg-cert.pem")

    def stop(self, sig: int = signal.SIGINT) -> None:
        """Stops the server with `sig` (SIGINT, Ctrl-C, unless told; SIGTERM as a service
        manager stops it), killing it if it has not ended within 10 s."""
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=10)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            self.log.close()


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server for the session, its database in a temporary directory."""
    s = Server(tmp_path_factory.mktemp("serve") / "g.db")
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture()
def own_server(tmp_path: Path) -> Iterator[Server]:
    """A server of the test's own, with a database of its own (nothing from other tests)."""
    s = Server(tmp_path / "g.db")
    try:
        yield s
    finally:
        s.stop()


# Each test module's time (set-up, calls and tear-down of its tests), so that CI's log says
# where the pytest stage goes: printed at the end, kept in target/pytest-module-times.txt.
_MODULE_SECONDS: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    module = report.nodeid.split("::", 1)[0]
    _MODULE_SECONDS[module] = _MODULE_SECONDS.get(module, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _MODULE_SECONDS:
        return
    rows = sorted(_MODULE_SECONDS.items(), key=lambda kv: -kv[1])
    text = "".join(f"{s:8.1f} s  {m}\n" for m, s in rows)
    terminalreporter.write_sep("=", "time per test module")
    terminalreporter.write(text)
    out = REPO / "target" / "pytest-module-times.txt"
    out.parent.mkdir(exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(out)


def warnings_but_testbed_addresses(warnings: List[str]) -> List[str]:
    """`set_config`'s warnings but the documented one for a port flow whose addresses are left
    at the model's default (sent as the testbed's: docs/guide/server.md)."""
    return [w for w in warnings if "out as gapless's testbed address" not in w]
