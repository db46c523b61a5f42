#!/usr/bin/env python3
"""Meter benchmarks on the veth testbed, in one run, interleaved.

  keepup     gapless sends 1.5 M frames unpaced (its maximum rate), to the sink's MAC and to a
             MAC nobody owns (the sender's top rate); the sink is metered by
             (a) gapless's live meter (`run --rx`) or (b) tcpdump -B 131072 --time-stamp-precision=nano.
             Reported: frames sent, frames the meter saw, the kernel's capture drops, and the
             RX rate (frames seen / send time). One capture at a time, alternating.
  fast       gapless's fastest sender (AF_XDP, batch 32, ~0.9 Mpps) sends 3 M frames to a MAC
             nobody owns; metered by gapless on AF_PACKET, on AF_XDP (XDP attached native, then
             generic), and by tcpdump. Same figures as keepup.
  precision  CBR 64 B at 100 kpps for 3 s with both capturing the same run: the live meter's
             figures beside tcpdump + `gapless analyze` (rate error, |err| p50/p99, MSE, burst
             fraction, W100 max rate).
  stamps     CBR 64 B at 100 kpps for 3 s, metered by AF_PACKET and by AF_XDP with each RX stamp
             (--xdp-stamp metadata, prefix, socket; attached native and generic), one run each,
             interleaved: latency p50/p99 and |gap - target| p50/p99 per stamp (DESIGN-NOTES 90).
             tcpdump cannot watch the same run: the XDP program takes the frames before any
             packet tap sees them, so the schedule itself is the reference.

Run as root: python3 bench/meter.py [--reps 3] [--only keepup|fast|precision|stamps]. Raw results: bench/results/meter-<UTC>.jsonl,
summary: .md next to it.
"""
import argparse
import datetime
import json
import os
import re
import signal
import statistics
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# GAPLESS_BIN: another build (e.g. target/ci/gapless, which the tests use) instead of the release one.
G = os.environ.get("GAPLESS_BIN", os.path.join(ROOT, "target", "release", "gapless"))
BED = "gm"
# Frames to a MAC the sink does not own: the veth delivers them, the packet sockets see them
# (the meter is promiscuous, tcpdump too), and the stack drops them at once; the sender then
# reaches its highest rate (~0.6 Mpps here) because the sink's UDP/ICMP work is gone.
OTHER_MAC = "02:67:6c:00:00:99"
TXNS, RXNS, TXIF, RXIF = f"{BED}-tx", f"{BED}-rx", f"{BED}-tx0", f"{BED}-rx0"


def sh(*args):
    return subprocess.run(list(args), check=True, capture_output=True, text=True)


def profile(tmp, rate, end="duration_s = 3", dst=None):
    p = os.path.join(tmp, f"p{rate}{dst or ''}.toml")
    tmpl = f"[stream.template]\neth_dst = \"{dst}\"\n" if dst else ""
    with open(p, "w") as f:
        f.write(f"seed = 5\n[[stream]]\nname = \"s\"\nsize = 64\n{tmpl}[stream.timing]\nrate_pps = {rate}\n{end}\n")
    return p


def tcpdump(path):
    p = subprocess.Popen(["ip", "netns", "exec", RXNS, "tcpdump", "-i", RXIF, "-w", path,
                          "--time-stamp-precision=nano", "-B", "131072", "-s", "2048"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    t0 = time.time()
    buf = ""
    while time.time() - t0 < 10:
        line = p.stderr.readline()
        buf += line
        if "listening on" in line or not line:
            break
    return p


def tcpdump_stop(p):
    time.sleep(1.5)  # libpcap hands over its last TPACKET_V3 block after 1 s
    os.killpg(p.pid, signal.SIGINT)
    err = p.communicate(timeout=20)[1]
    cap = int(re.search(r"(\d+) packets? captured", err).group(1))
    drop = int(re.search(r"(\d+) packets? dropped by kernel", err).group(1))
    return cap, drop


def run(prof, tmp, extra):
    j = os.path.join(tmp, "r.json")
    sh(G, "run", prof, "--netns", TXNS, "--iface", TXIF, "--json", j, "-q", *extra)
    with open(j) as f:
        return json.load(f)


def captures(tmp, rep, out, bench, prof, send, to, meters):
    """Runs `prof` with `send` once per meter: (name, extra `run` arguments) for gapless's live
    meter, or (name, None) for tcpdump at the sink. One row per run: sent, seen, drops, rates."""
    rows = []
    for who, extra in meters:
        if extra is not None:
            r = run(prof, tmp, send + ["--rx", RXIF, "--rx-netns", RXNS] + extra)
            s = r["rx"]["streams"][0] if r["rx"]["streams"] else {"rx_frames": 0}
            seen, drops = s["rx_frames"], r["rx"]["capture"]["kernel_drops"]
            if drops:
                print("  ", r["rx"]["capture"]["method"])
        else:
            pcap = os.path.join(tmp, "c.pcap")
            p = tcpdump(pcap)
            r = run(prof, tmp, send)
            seen, drops = tcpdump_stop(p)
            os.remove(pcap)
        sent, dur = r["sent_frames"], r["duration_ns"] / 1e9
        row = dict(bench=bench, rep=rep, meter=who, to=to, sent=sent, seen=seen, kernel_drops=drops,
                   seen_frac=seen / sent if sent else 0, send_mpps=sent / dur / 1e6, rx_mpps=seen / dur / 1e6)
        print(json.dumps(row))
        out.write(json.dumps(row) + "\n")
        rows.append(row)
    return rows


def keepup(tmp, rep, out, dst):
    # Unpaced, the schedule's duration means nothing: a count of frames instead.
    prof = profile(tmp, 10_000_000, "count = 1_500_000", dst)
    return captures(tmp, rep, out, "keepup", prof, ["--pace", "off"], "other MAC" if dst else "sink's MAC",
                    [("gapless", []), ("tcpdump", None)])


def fast(tmp, rep, out):
    prof = profile(tmp, 14_000_000, "count = 3_000_000\nburst = 32", OTHER_MAC)
    xdp = ["--rx-backend", "afxdp", "--xdp-attach"]
    return captures(tmp, rep, out, "fast", prof, ["--pace", "off", "--backend", "afxdp"], "other MAC",
                    [("gapless afpacket", []), ("gapless afxdp native", xdp + ["native"]),
                     ("gapless afxdp generic", xdp + ["generic"]), ("tcpdump", None)])


def precision(tmp, rep, out):
    prof = profile(tmp, 100_000)
    pcap = os.path.join(tmp, "p.pcap")
    p = tcpdump(pcap)
    j = os.path.join(tmp, "r.json")
    sh(G, "run", prof, "--netns", TXNS, "--iface", TXIF, "--rx", RXIF, "--rx-netns", RXNS, "--json", j, "-q")
    tcpdump_stop(p)
    a = os.path.join(tmp, "a.json")
    sh(G, "analyze", pcap, "--profile", j, "--signed-only", "--json", a)
    rows = []
    for who, path, get in (("gapless live", j, lambda d: d["rx"]), ("tcpdump+analyze", a, lambda d: d)):
        with open(path) as f:
            s = get(json.load(f))["streams"][0]
        ia = s["interarrival"]
        row = dict(bench="precision", rep=rep, meter=who, frames=s["rx_frames"],
                   rate_error_rel=ia["rate_error_rel"], abs_err_p50_ns=ia["abs_err_p50_ns"],
                   abs_err_p99_ns=ia["abs_err_p99_ns"], mse_ns2=ia["mse_ns2"], burst_fraction=ia["burst_fraction"],
                   w100_max_pct=s["rate_jitter"][0]["max_pct"])
        print(json.dumps(row))
        out.write(json.dumps(row) + "\n")
        rows.append(row)
    return rows


STAMPS = [("afpacket", [])] + [
    (f"afxdp {stamp} {attach}", ["--rx-backend", "afxdp", "--xdp-stamp", stamp, "--xdp-attach", attach])
    for stamp in ("metadata", "prefix", "socket") for attach in ("native", "generic")]


def stamps(tmp, rep, out):
    prof = profile(tmp, 100_000)
    rows = []
    for who, extra in STAMPS:
        r = run(prof, tmp, ["--rx", RXIF, "--rx-netns", RXNS] + extra)
        s = r["rx"]["streams"][0]
        ia, lat = s["interarrival"], s["latency"]
        row = dict(bench="stamps", rep=rep, meter=who, frames=s["rx_frames"], lost=s["lost_vs_tx"],
                   rx_stamp=r["rx"]["verdict"].get("rx_stamp", ""), complete=r["rx"]["verdict"]["complete"],
                   lat_p50_ns=lat["percentiles_ns"]["p50"], lat_p99_ns=lat["percentiles_ns"]["p99"],
                   abs_err_p50_ns=ia["abs_err_p50_ns"], abs_err_p99_ns=ia["abs_err_p99_ns"],
                   rate_error_rel=ia["rate_error_rel"], schedule_held=r.get("verdict", {}).get("held"))
        print(json.dumps(row))
        out.write(json.dumps(row) + "\n")
        rows.append(row)
    return rows


def stamp_lines(rows, med):
    lines = ["", "## RX stamps: one 100 kpps CBR run per RX path, interleaved", "",
             "| meter | stamp | frames | lost | lat p50 ns | lat p99 ns | abs err p50 ns | abs err p99 ns | rate error |",
             "|---|---|---|---|---|---|---|---|---|"]
    for who, _ in STAMPS:
        r = [x for x in rows if x["bench"] == "stamps" and x["meter"] == who]
        if r:
            lines.append(f"| {who} | {r[0]['rx_stamp']} | {med([x['frames'] for x in r]):.0f} | {med([x['lost'] for x in r]):.0f} | "
                         f"{med([x['lat_p50_ns'] for x in r]):.0f} | {med([x['lat_p99_ns'] for x in r]):.0f} | "
                         f"{med([x['abs_err_p50_ns'] for x in r]):.0f} | {med([x['abs_err_p99_ns'] for x in r]):.0f} | "
                         f"{med([x['rate_error_rel'] for x in r]):+.5%} |")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--only", choices=["keepup", "fast", "precision", "stamps"], help="one part of the benchmark")
    a = ap.parse_args()
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    base = os.path.join(HERE, "results", f"meter{'-' + a.only if a.only else ''}-{stamp}")
    sh(G, "testbed", "up", "--name", BED)
    rows = []
    try:
        with open(base + ".jsonl", "w") as out, tempfile.TemporaryDirectory() as tmp:
            for rep in range(a.reps):
                if a.only in (None, "keepup"):
                    rows += keepup(tmp, rep, out, None)
                    rows += keepup(tmp, rep, out, OTHER_MAC)
                if a.only in (None, "fast"):
                    rows += fast(tmp, rep, out)
                if a.only in (None, "precision"):
                    rows += precision(tmp, rep, out)
                if a.only in (None, "stamps"):
                    rows += stamps(tmp, rep, out)
    finally:
        sh(G, "testbed", "down", "--name", BED)
    med = lambda xs: statistics.median(xs)
    lines = [f"# Meter benchmarks {stamp} ({a.reps} rounds, medians)"]
    head = ["| frames to | meter | sent | seen | seen / sent | kernel drops | send Mpps | RX Mpps |",
            "|---|---|---|---|---|---|---|---|"]

    def capture_rows(bench, tos, whos):
        out = []
        for to in tos:
            for who in whos:
                r = [x for x in rows if x["bench"] == bench and x["meter"] == who and x["to"] == to]
                if r:
                    out.append(f"| {to} | {who} | {med([x['sent'] for x in r]):.0f} | {med([x['seen'] for x in r]):.0f} | "
                               f"{med([x['seen_frac'] for x in r]):.4f} | {med([x['kernel_drops'] for x in r]):.0f} | "
                               f"{med([x['send_mpps'] for x in r]):.3f} | {med([x['rx_mpps'] for x in r]):.3f} |")
        return out
    k = capture_rows("keepup", ("sink's MAC", "other MAC"), ("gapless", "tcpdump"))
    if k:
        lines += ["", "## Keeping up: gapless sends 1.5 M frames unpaced; one capture at a time", ""] + head + k
    f = capture_rows("fast", ("other MAC",), ("gapless afpacket", "gapless afxdp native", "gapless afxdp generic", "tcpdump"))
    if f:
        lines += ["", "## Keeping up with the fastest sender: AF_XDP batch 32, 3 M frames", ""] + head + f
    if any(x["bench"] == "precision" for x in rows):
        lines += ["", "## Precision of one 100 kpps CBR run, seen by both", "",
                  "| meter | frames | rate error | abs err p50 ns | abs err p99 ns | MSE ns² | burst | W100 max % |",
                  "|---|---|---|---|---|---|---|---|"]
        for who in ("gapless live", "tcpdump+analyze"):
            r = [x for x in rows if x["bench"] == "precision" and x["meter"] == who]
            lines.append(f"| {who} | {med([x['frames'] for x in r]):.0f} | {med([x['rate_error_rel'] for x in r]):+.5%} | "
                         f"{med([x['abs_err_p50_ns'] for x in r]):.0f} | {med([x['abs_err_p99_ns'] for x in r]):.0f} | "
                         f"{med([x['mse_ns2'] for x in r]):.3e} | {med([x['burst_fraction'] for x in r]):.3%} | "
                         f"{med([x['w100_max_pct'] for x in r]):.1f} |")
    if any(x["bench"] == "stamps" for x in rows):
        lines += stamp_lines(rows, med)
    text = "\n".join(lines) + "\n"
    with open(base + ".md", "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
