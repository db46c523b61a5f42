#!/usr/bin/env python3
"""Benchmarks of gapless against peer tools on the veth testbed, in one run, interleaved.

  throughput  64-byte frames as fast as each tool goes: Mpps delivered at the sink (the
              receiving veth's counter) and the sender's CPU time per frame.
  precision   CBR at fixed rates: the sink's tcpdump (nanosecond timestamps) analysed by
              sinkstats.py: rate error, |inter-arrival - target| percentiles, MSE, burst fraction.

Run as root: python3 bench/peers.py throughput|precision [--reps 3]. Needs scripts/setup.sh --bench.
Raw results go to bench/results/<bench>-<UTC time>.jsonl; a summary table (medians) is printed
and written next to it as .md.
"""
import argparse
import datetime
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
G = os.path.join(ROOT, "target", "release", "gapless")
BED = "gb"
TXNS, RXNS, TXIF, RXIF = f"{BED}-tx", f"{BED}-rx", f"{BED}-tx0", f"{BED}-rx0"
# Throughput frames go to a MAC the sink does not own: the receiving veth counts them, then
# the stack drops them at once (PACKET_OTHERHOST), so the sink's IP/UDP/ICMP work does not
# dilute the senders' differences. Precision runs use the sink's own MAC.
OTHER_MAC = "02:67:6c:00:00:99"
TRAFGEN_CFG = ("{ eth(da=DSTMAC, sa=02:67:6c:00:00:01), "
               "ipv4(saddr=198.18.0.1, daddr=198.18.0.2, ttl=64), udp(sp=1024, dp=1024), fill(0x00, FILL) }\n")


def sh(*args, **kw):
    return subprocess.run(list(args), check=True, capture_output=True, text=True, **kw)


def in_tx(*args):
    return ["ip", "netns", "exec", TXNS, *args]


def rx_packets():
    out = sh("ip", "-n", RXNS, "-s", "-j", "link", "show", "dev", RXIF).stdout
    return json.loads(out)[0]["stats64"]["rx"]["packets"]


def cpu_split(pgid):
    """(utime, stime) of every process in the process group, in seconds; threads included."""
    user = system = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                st = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(st[2]) == pgid:  # field 5: pgrp
            user += int(st[11])  # field 14
            system += int(st[12])  # field 15
    t = os.sysconf("SC_CLK_TCK")
    return user / t, system / t


def cpu_seconds(pgid):
    """utime + stime of every process in the process group (ticks -> s)."""
    return sum(cpu_split(pgid))


def start(cmd):
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)


def stop(p, sig=signal.SIGINT):
    try:
        os.killpg(p.pid, sig)
    except ProcessLookupError:
        pass
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()


class Work:
    def __init__(self, dst_mac="02:67:6c:00:00:02", size=64):
        self.dir = tempfile.mkdtemp(prefix="gapless-bench-")
        self.mac = dst_mac
        self.size = size
        self.tg = os.path.join(self.dir, "tg.cfg")
        with open(self.tg, "w") as f:
            # trafgen writes the frame without FCS: 14 + 20 + 8 + fill = size - 4
            f.write(TRAFGEN_CFG.replace("DSTMAC", dst_mac).replace("FILL", str(size - 4 - 42)))

    def stream(self, timing):
        """A UDP stream of this bench's frame size to its destination MAC."""
        return f"[[stream]]\nsize = {self.size}\n[stream.template]\neth_dst = \"{self.mac}\"\n[stream.timing]\n{timing}\n"

    def profile(self, name, body):
        p = os.path.join(self.dir, name)
        with open(p, "w") as f:
            f.write(body)
        return p

    def pcap64(self, frames):
        """A pcap of `frames` 64-byte frames (for tcpreplay), made by gapless."""
        p = os.path.join(self.dir, f"f{frames}-{self.size}.pcap")
        if not os.path.exists(p):
            prof = self.profile(f"pc{frames}-{self.size}.toml", self.stream(f"rate_pps = 1e6\ncount = {frames}"))
            sh(G, "run", prof, "--out", p, "-q")
        return p


# ---------------------------------------------------------------- throughput

def testpmd(vdev, size):
    """dpdk-testpmd txonly on one forwarding lcore (1; lcore 0 only prints stats), no hugepages."""
    return in_tx("dpdk-testpmd", "-l", "0,1", "--no-huge", "-m", "1024", "--no-shconf", "--no-pci", "--log-level", "*:error",
                 "--vdev", vdev, "--", "--forward-mode=txonly", f"--txpkts={size - 4}", "--stats-period", "1",
                 "--auto-start", "--total-num-mbufs=16384")


def throughput_tools(w):
    # Unpaced (--pace off): the rate only has to pass the link-speed check; 99 % of veth's 10 Gbit/s.
    top = 0.99 * 10e9 / ((w.size + 20) * 8)
    unb = w.profile("unb1.toml", w.stream(f"rate_pps = {top:.0f}"))
    unb32 = w.profile("unb32.toml", w.stream(f"rate_pps = {top:.0f}\nburst = 32"))
    two = ["--cores", "0,1", "--split-cbr"]
    return {
        "gapless afpacket batch 1": in_tx(G, "run", unb, "--iface", TXIF, "--pace", "off", "-q"),
        "gapless afpacket batch 32": in_tx(G, "run", unb32, "--iface", TXIF, "--pace", "off", "-q"),
        "gapless tx-ring batch 1": in_tx(G, "run", unb, "--iface", TXIF, "--pace", "off", "-q", "--tx-method", "ring"),
        "gapless tx-ring batch 32": in_tx(G, "run", unb32, "--iface", TXIF, "--pace", "off", "-q", "--tx-method", "ring"),
        "gapless afxdp batch 1": in_tx(G, "run", unb, "--iface", TXIF, "--pace", "off", "-q", "--backend", "afxdp"),
        "gapless afxdp batch 32": in_tx(G, "run", unb32, "--iface", TXIF, "--pace", "off", "-q", "--backend", "afxdp"),
        "gapless afpacket batch 32, 2 cores": in_tx(G, "run", unb32, "--iface", TXIF, "--pace", "off", "-q", *two),
        "gapless afxdp batch 32, 2 cores": in_tx(G, "run", unb32, "--iface", TXIF, "--pace", "off", "-q",
                                                 "--backend", "afxdp", *two),
        "trafgen (1 cpu)": in_tx("trafgen", "--dev", TXIF, "--conf", w.tg, "--cpus", "1", "-q"),
        "tcpreplay --topspeed": in_tx("tcpreplay", "--topspeed", "--loop=100", "-q", "-i", TXIF, w.pcap64(200000)),
        "dpdk-testpmd txonly net_af_packet": testpmd(f"net_af_packet0,iface={TXIF}", w.size),
        "dpdk-testpmd txonly net_af_xdp": testpmd(f"net_af_xdp0,iface={TXIF},start_queue=0,queue_count=1", w.size),
        # UDP through the whole stack to the sink's own address: 18 B of payload make 64 B frames.
        "iperf3 -u -b 0": (in_tx("iperf3", "-c", "198.18.0.2", "-u", "-b", "0", "-l", str(w.size - 46), "-t", "3600"),
                           ["ip", "netns", "exec", RXNS, "iperf3", "-s"]),
    }


def bench_throughput(reps, size=64, only=None, warm=1.0, window=3.0):
    w = Work(OTHER_MAC, size)
    tools = {k: v for k, v in throughput_tools(w).items() if not only or k in only}
    rows = []
    for rep in range(reps):
        for name, cmd in tools.items():
            server = None
            if isinstance(cmd, tuple):
                cmd, server_cmd = cmd
                server = start(server_cmd)
                time.sleep(0.5)
            p = start(cmd)
            time.sleep(warm)
            if p.poll() is not None:
                sys.exit(f"{name} exited early: {p.stderr.read().decode()[-500:]}")
            (u0, s0), r0, t0 = cpu_split(p.pid), rx_packets(), time.monotonic()
            time.sleep(window)
            (u1, s1), r1, t1 = cpu_split(p.pid), rx_packets(), time.monotonic()
            stop(p)
            if server:
                stop(server)
            frames = r1 - r0
            c = (u1 - u0) + (s1 - s0)
            row = {"bench": "throughput", "tool": name, "size": size, "rep": rep, "frames": frames, "seconds": t1 - t0,
                   "mpps": frames / (t1 - t0) / 1e6, "cpu_s": c, "user_s": u1 - u0, "system_s": s1 - s0,
                   "cpu_ns_per_frame": c * 1e9 / frames if frames else None,
                   "user_ns_per_frame": (u1 - u0) * 1e9 / frames if frames else None}
            rows.append(row)
            print(f"  rep {rep} {name:<28} {row['mpps']:.3f} Mpps  cpu {row['cpu_ns_per_frame'] or 0:.0f} ns/frame", flush=True)
            time.sleep(0.5)
    return rows


def summarize_throughput(rows):
    by = {}
    for r in rows:
        by.setdefault(r["tool"], []).append(r)
    med = {t: statistics.median(x["mpps"] for x in v) for t, v in by.items()}
    peers = [v for t, v in med.items() if not t.startswith("gapless")]
    best_peer = max(peers) if peers else float("nan")
    lines = ["| tool | Mpps at the sink (median) | runs | ratio to the best peer | sender CPU ns/frame (median) | of it in user space |",
             "|---|---|---|---|---|---|"]
    for t, v in by.items():
        cpu = statistics.median(x["cpu_ns_per_frame"] for x in v if x["cpu_ns_per_frame"])
        user = [x["user_ns_per_frame"] for x in v if x.get("user_ns_per_frame")]
        runs = ", ".join("%.3f" % x["mpps"] for x in v)
        u = f"{statistics.median(user):.0f}" if user else "-"
        ratio = f"{med[t] / best_peer:.2f}" if peers else "- (no peer in this run)"
        lines.append(f"| {t} | {med[t]:.3f} | {runs} | {ratio} | {cpu:.0f} | {u} |")
    # Two send loops against one of the same backend (issue 33: at least 1.9x).
    for t in med:
        one = t.removesuffix(", 2 cores")
        if t != one and one in med:
            lines.append(f"\n{t}: {med[t] / med[one]:.3f}x {one}")
    return "\n".join(lines)


# ---------------------------------------------------------------- precision

def precision_tools(w, pps, secs):
    n = int(pps * secs)
    prof = w.profile(f"cbr{pps}.toml", w.stream(f"rate_pps = {pps}\ncount = {n}"))
    gap_ns = int(round(1e9 / pps))
    return {
        "gapless": (in_tx(G, "run", prof, "--iface", TXIF, "-q"), None),
        "trafgen -b": (in_tx("trafgen", "--dev", TXIF, "--conf", w.tg, "--cpus", "1", "-b", f"{pps}pps", "-n", str(n), "-q"), None),
        "trafgen -t": (in_tx("trafgen", "--dev", TXIF, "--conf", w.tg, "--cpus", "1", "-t", f"{gap_ns}ns", "-n", str(n), "-q"), None),
        "tcpreplay --pps": (in_tx("tcpreplay", f"--pps={pps}", "-q", "-i", TXIF, w.pcap64(n)), None),
        "iperf3 -u -b": (in_tx("iperf3", "-c", "198.18.0.2", "-u", "-l", "18", "-b", str(int(pps * 18 * 8)), "-t", str(secs)), "iperf3"),
        "ITGSend -C": (in_tx("ITGSend", "-a", "198.18.0.2", "-T", "UDP", "-C", str(pps), "-c", "18", "-t", str(int(secs * 1000))), "itg"),
    }


def run_precision_one(w, name, cmd, server, pps, secs):
    pcap = os.path.join(w.dir, "sink.pcap")
    srv = None
    if server == "iperf3":
        srv = start(["ip", "netns", "exec", RXNS, "iperf3", "-s", "-1", "-B", "198.18.0.2"])
    elif server == "itg":
        srv = start(["ip", "netns", "exec", RXNS, "ITGRecv"])
    cap = subprocess.Popen(["ip", "netns", "exec", RXNS, "tcpdump", "-i", RXIF, "-w", pcap, "--time-stamp-precision=nano",
                            "-B", "131072", "-s", "128", "udp"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           start_new_session=True)
    deadline = time.monotonic() + 10
    line = b""
    while time.monotonic() < deadline and b"listening on" not in line:
        line = cap.stderr.readline()
    time.sleep(0.5 if srv else 0.1)
    p = subprocess.run(cmd, capture_output=True, timeout=secs * 4 + 30)
    time.sleep(1.5)  # libpcap hands over TPACKET_V3 blocks after up to 1 s
    stop(cap)
    if srv:
        stop(srv)
    out = os.path.join(w.dir, "stats.json")
    sh(sys.executable, os.path.join(HERE, "sinkstats.py"), pcap, "--target-pps", str(pps), "--unsigned", "udp", "--json", out)
    flows = json.load(open(out))["flows"]
    flows = [f for f in flows if f["frames"] > 10]
    if not flows:
        return {"tool": name, "pps": pps, "error": f"no frames at the sink; rc {p.returncode}: {p.stderr.decode()[-300:]}"}
    f = max(flows, key=lambda f: f["frames"])
    keep = ("frames", "rate_pps", "rate_error_rel", "abs_err_p50_ns", "abs_err_p99_ns", "abs_err_p999_ns", "mse_ns2", "burst_fraction")
    return {"tool": name, "pps": pps, **{k: f.get(k) for k in keep}}


def bench_precision(reps, rates, secs, only=None):
    w = Work()
    rows = []
    for pps in rates:
        tools = {k: v for k, v in precision_tools(w, pps, secs).items() if not only or k in only}
        for rep in range(reps):
            for name, (cmd, server) in tools.items():
                r = run_precision_one(w, name, cmd, server, pps, secs)
                r.update(bench="precision", rep=rep, seconds=secs)
                rows.append(r)
                if "error" in r:
                    print(f"  {pps} pps rep {rep} {name:<16} ERROR {r['error']}", flush=True)
                else:
                    print(f"  {pps} pps rep {rep} {name:<16} rate err {r['rate_error_rel']:+.4%} |err| p50 {r['abs_err_p50_ns']:.0f} "
                          f"p99 {r['abs_err_p99_ns']:.0f} MSE {r['mse_ns2']:.3g} burst {r['burst_fraction']:.2%}", flush=True)
    return rows


def summarize_precision(rows):
    lines = ["| rate | tool | rate error | \\|err\\| p50 ns | p99 ns | p99.9 ns | MSE ns² | burst fraction | runs |",
             "|---|---|---|---|---|---|---|---|---|"]
    groups = {}
    for r in rows:
        groups.setdefault((r["pps"], r["tool"]), []).append(r)
    for (pps, tool), v in groups.items():
        ok = [x for x in v if "error" not in x]
        if not ok:
            lines.append(f"| {pps:g} | {tool} | failed: {v[0]['error'][:60]} | | | | | | {len(v)} |")
            continue
        m = lambda k: statistics.median(x[k] for x in ok)
        lines.append(f"| {pps:g} | {tool} | {m('rate_error_rel'):+.4%} | {m('abs_err_p50_ns'):.0f} | {m('abs_err_p99_ns'):.0f} | "
                     f"{m('abs_err_p999_ns'):.0f} | {m('mse_ns2'):.3g} | {m('burst_fraction'):.3%} | {len(ok)} |")
    return "\n".join(lines)


def tool_list(arg):
    if not arg:
        return None
    return arg.split(";") if ";" in arg else arg.split(",")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bench", choices=["throughput", "precision"])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rates", default="10000,100000,250000")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--tools", help="subset of the tools, separated by commas (or by semicolons when a name has a comma, e.g. 'gapless afxdp batch 32;gapless afxdp batch 32, 2 cores')")
    ap.add_argument("--size", type=int, default=64, help="throughput: frame size with FCS")
    ap.add_argument("--queues", type=int, help="testbed queues each way (throughput: 2, so that two AF_XDP "
                    "send loops each own one; precision: 1)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("peers.py needs root (network namespaces, raw sockets)")
    if not os.path.exists(G):
        sys.exit("build first: bash scripts/setup.sh --bench")
    # Two queues each way, so that two AF_XDP send loops each own one (--cores 0,1).
    queues = a.queues or (2 if a.bench == "throughput" else 1)
    sh(G, "testbed", "up", "--name", BED, "--queues", str(queues))
    try:
        if a.bench == "throughput":
            rows = bench_throughput(a.reps, a.size, tool_list(a.tools))
            table = summarize_throughput(rows)
        else:
            only = tool_list(a.tools)
            rows = bench_precision(a.reps, [int(x) for x in a.rates.split(",")], a.seconds, only)
            table = summarize_precision(rows)
    finally:
        sh(G, "testbed", "down", "--name", BED)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    tag = f"-{a.size}B" if a.bench == "throughput" and a.size != 64 else ""
    tag += f"-{queues}q" if a.queues else ""
    base = os.path.join(HERE, "results", f"{a.bench}{tag}-{stamp}")
    with open(base + ".jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    with open(base + ".md", "w") as f:
        f.write(f"{a.bench}, {stamp}, {os.uname().release}, reps {a.reps}, testbed queues {queues}\n\n{table}\n")
    print(table)
    print(f"raw: {base}.jsonl")


if __name__ == "__main__":
    main()
