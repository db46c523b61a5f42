"""Deployment beyond this machine (issue 28): the Containerfile, the containerlab topology and
the Kubernetes manifests cannot run here (no container runtime, no cluster). What can be
checked is: they parse, their objects refer to each other correctly, and every gapless flag
they pass is one `gapless serve` takes."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

from conftest import cli

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def docs() -> list[dict[str, Any]]:
    out = []
    for f in sorted((DEPLOY / "k8s").glob("*.yaml")):
        out += [d for d in yaml.safe_load_all(f.read_text()) if d]
    return out


def serve_flags() -> set[str]:
    help_text = subprocess.run([cli(), "serve", "--help"], capture_output=True, text=True, check=True).stdout
    return set(re.findall(r"--[a-z][a-z0-9-]+", help_text))


def check_args(args: list[str], where: str) -> None:
    assert args[0] == "serve", f"{where}: expected gapless serve; got {args[:1]}"
    unknown = {a for a in args if a.startswith("--")} - serve_flags()
    assert not unknown, f"{where}: flags gapless serve does not take: {unknown}"


def one(kind: str, name: str) -> dict[str, Any]:
    found = [d for d in docs() if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name}; got {len(found)}"
    return found[0]


def test_every_manifest_parses_into_named_objects_in_the_gapless_namespace() -> None:
    ds = docs()
    assert {d["kind"] for d in ds} >= {"Namespace", "Secret", "DaemonSet", "Deployment", "Service", "NetworkAttachmentDefinition"}
    for d in ds:
        assert d["apiVersion"] and d["metadata"]["name"], d
        if d["kind"] != "Namespace":
            assert d["metadata"]["namespace"] == "gapless", f"{d['kind']} {d['metadata']['name']} is outside the namespace"


def container(d: dict[str, Any]) -> dict[str, Any]:
    return dict(d["spec"]["template"]["spec"]["containers"][0])


def mounted_secret(d: dict[str, Any], path_prefix: str) -> str:
    """The secret mounted where the container reads `path_prefix`."""
    c, spec = container(d), d["spec"]["template"]["spec"]
    mount = max((m for m in c["volumeMounts"] if path_prefix.startswith(m["mountPath"].rstrip("/") + "/")),
                key=lambda m: len(m["mountPath"]))
    vol = next(v for v in spec["volumes"] if v["name"] == mount["name"])
    return str(vol["secret"]["secretName"])


def test_agents_run_one_per_node_on_its_address_with_the_agent_token() -> None:
    secrets = {d["metadata"]["name"] for d in docs() if d["kind"] == "Secret"}
    for name, env in (("gapless-agent", "NODE_IP"), ("gapless-agent-multus", "POD_IP")):
        d = one("DaemonSet", name)
        c = container(d)
        args = c["args"]
        check_args(args, name)
        assert args[args.index("--otg-listen") + 1] == f"$({env}):8443", args
        tf = args[args.index("--token-file") + 1]
        assert mounted_secret(d, tf) == "gapless-agent-token" in secrets
        ev = next(e for e in c["env"] if e["name"] == env)
        assert ev["valueFrom"]["fieldRef"]["fieldPath"] in ("status.hostIP", "status.podIP")
        assert "NET_RAW" in c["securityContext"]["capabilities"]["add"]
        assert d["spec"]["selector"]["matchLabels"].items() <= d["spec"]["template"]["metadata"]["labels"].items()
    assert one("DaemonSet", "gapless-agent")["spec"]["template"]["spec"]["hostNetwork"] is True
    multus = one("DaemonSet", "gapless-agent-multus")["spec"]["template"]["metadata"]["annotations"]
    nad = one("NetworkAttachmentDefinition", multus["k8s.v1.cni.cncf.io/networks"])
    assert json.loads(nad["spec"]["config"])["type"] == "macvlan"


def test_the_controller_drives_agents_with_their_token_behind_a_service() -> None:
    d = one("Deployment", "gapless-controller")
    c = container(d)
    args = c["args"]
    check_args(args, "controller")
    assert mounted_secret(d, args[args.index("--agent-token-file") + 1]) == "gapless-agent-token"
    assert mounted_secret(d, args[args.index("--token-file") + 1]) == "gapless-controller-token"
    svc = one("Service", "gapless-controller")
    assert svc["spec"]["selector"].items() <= d["spec"]["template"]["metadata"]["labels"].items()
    names = {p["name"] for p in c["ports"]}
    assert {p["targetPort"] for p in svc["spec"]["ports"]} <= names
    # OTG gRPC and gNMI on the ports and names KNE's OTG node profile gives them.
    ports = {p["name"]: p["port"] for p in svc["spec"]["ports"]}
    assert (ports["grpc"], ports["gnmi"]) == (40051, 50051), ports
    assert args[args.index("--otg-grpc-listen") + 1] == "0.0.0.0:40051" and args[args.index("--gnmi-listen") + 1] == "0.0.0.0:50051", args
    # The Service's names are in the certificate: the controller allows them as hosts.
    hosts = [args[i + 1] for i, a in enumerate(args) if a == "--allow-host"]
    assert "gapless-controller" in hosts


def test_the_containerlab_topology_has_two_agents_around_a_router() -> None:
    t = yaml.safe_load((DEPLOY / "containerlab" / "gapless.clab.yml").read_text())
    nodes = t["topology"]["nodes"]
    for n in ("gen1", "gen2"):
        args = nodes[n]["cmd"].split()
        check_args(args, n)
        assert args[args.index("--otg-listen") + 1] == f"{nodes[n]['mgmt-ipv4']}:8443", f"{n} must listen on its mgmt address"
    for link in t["topology"]["links"]:
        for end in link["endpoints"]:
            assert end.split(":")[0] in nodes, end
    assert any("ip_forward=1" in e for e in nodes["dut"]["exec"])


def test_the_containerfile_is_debian_with_the_release_binary_tcpdump_and_linuxptp() -> None:
    text = (DEPLOY / "Containerfile").read_text()
    assert re.search(r"^FROM debian:", text, re.M)
    assert "tcpdump" in text and "linuxptp" in text
    assert "COPY target/release/gapless /usr/local/bin/gapless" in text
