"""ondatra (Go) against gapless serve, as featureprofiles runs an ATE without KNE: the tests in
tests/ondatra push the config over OTG gRPC with gosnappi and read every result over gNMI
(ondatra's OTG client has no metrics call). The test binary is built once per run of the
test command (`scripts/setup.sh --test` builds it; Go's build cache keeps it) and run here
once; each Go test is then checked by name, its log shown when it failed."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from conftest import Server
from test_otg_ixia import A, Z, two_veths

REPO = Path(__file__).resolve().parents[2]
MODULE = REPO / "tests" / "ondatra"
BINARY = REPO / "target" / "ondatra" / "ondatra.test"
# The server's table of the OTG models, checked against the schema ondatra was generated from.
SCHEMA = REPO / "crates" / "gapless-gnmi" / "src" / "schema.tsv"
NS = "glon"
GO_TESTS = [
    "TestPushConfigStartProtocolsAndWaitForARP",
    "TestAFlowsCountersWatchedAndReadAndItsCapture",
    "TestABgpPeerAndAnIsisRouterWatchedUntilUp",
    "TestAPortsLinkReadsDownAfterALinkDown",
    "TestTaggedMetricsCountEachDscpAsItArrives",
    "TestAppendConfigAndSetControlActionAreRefusedWithTheirReason",
    "TestTheServersSchemaIsOndatras",
]


def build() -> Path:
    """The test binary, built (or found up to date by Go's build cache)."""
    p = subprocess.run(["go", "test", "-c", "-o", str(BINARY), "."], cwd=MODULE, capture_output=True, text=True, timeout=1200)
    assert p.returncode == 0, f"expected the ondatra tests to build (scripts/setup.sh --test fetches Go's modules); got {p.returncode}: {p.stderr[-3000:]}"
    return BINARY


@pytest.fixture(scope="module")
def go_run(server: Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Every Go test's verdict and log, from one run of the binary against the session's server."""
    binary = build()
    tmp = tmp_path_factory.mktemp("ondatra")
    bind = {"ates": [{"name": "gapless", "otg": {"target": server.grpc, "insecure": True},
                      "gnmi": {"target": f"{server.gnmi[0]}:{server.gnmi[1]}", "skip_verify": True},
                      "ports": [{"id": "port1", "name": f"{NS}/{A}"}, {"id": "port2", "name": f"{NS}/{Z}"}]}],
            "options": {"username": "admin", "password": "admin"}}
    (tmp / "binding.json").write_text(json.dumps(bind))
    with two_veths(NS):
        p = subprocess.run([str(binary), "-testbed", str(MODULE / "testbed.textproto"), "-binding", str(tmp / "binding.json"),
                            "-test.v", "-test.timeout", "8m"], cwd=tmp, capture_output=True, text=True, timeout=600,
                           env={**os.environ, "GAPLESS_SCHEMA_TSV": str(SCHEMA)})
    out = p.stdout + p.stderr
    verdicts = {m.group(2): m.group(1) for m in re.finditer(r"^\s*--- (PASS|FAIL|SKIP): (\w+)", out, re.M)}
    yield {"out": out, "rc": str(p.returncode), **verdicts}


@pytest.mark.parametrize("name", GO_TESTS)
def test_ondatra(go_run: dict[str, str], name: str) -> None:
    got = go_run.get(name)
    log = go_run["out"]
    if got != "PASS":
        start = log.find(f"=== RUN   {name}")
        log = log[start:start + 6000] if start >= 0 else log[-6000:]
    assert got == "PASS", f"expected the ondatra test {name} to pass; got {got} (exit {go_run['rc']}):\n{log}"


def test_every_go_test_is_checked(go_run: dict[str, str]) -> None:
    ran = set(re.findall(r"^=== RUN\s+(Test\w+)$", go_run["out"], re.M))
    assert ran == set(GO_TESTS), f"expected the Go tests {sorted(GO_TESTS)} run and checked; got {sorted(ran)}"
