#!/usr/bin/env python3
"""The rate-control methods side by side: what each does to the spacing a sink sees.

The software counterpart of Mind the Gap's Table 4 and Figures 6-7. Methods that run on this
machine, interleaved in each round:
  software      gapless's busy-wait pacing at batch 1 (precise mode)
  batch8/32     throughput mode, 8 or 32 departures per send
  shaper-tbf    the kernel's tbf at the profile's rate, gapless unpaced through it
  shaper-htb    the kernel's HTB likewise
  filler        fillers at link_speed_bps = 1 Gbit/s through a Linux bridge that drops them
                (on veth "line rate" is as fast as veth takes frames: the spacing is not a
                wire's, and the table says so)
Each at 10 kpps, 100 kpps and RATE_HI (default 200 kpps, this VM's highest precise rate,
bench/README.md "Precise-mode ceiling"), 128 B frames for SECS seconds. The sink: tcpdump with
ns stamps on the receiving veth, then `gapless analyze --target-pps R`: rate error, |gap -
target| p50/p99, MSE, burst fraction, rate jitter over 100 frames (max %).

  python3 bench/rate_control.py [ROUNDS] [SECS]      defaults 3 2
Raw rows (JSON lines) go to bench/results/rate_control-<UTC>.jsonl; a table is printed.
Needs root, tcpdump, tc.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
G = os.environ.get("G", os.path.join(ROOT, "target/release/gapless"))
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
SECS = float(sys.argv[2]) if len(sys.argv) > 2 else 2.0
RATES = [10_000, 100_000, int(os.environ.get("RATE_HI", "200000"))]
METHODS = os.environ.get("METHODS", "software batch8 batch32 shaper-tbf shaper-htb filler").split()
N = "rcb"  # namespaces rcbt (sender), rcbb (bridge), rcbr (sink)


def sh(cmd, check=True):
    return subprocess.run(cmd, shell=True, check=check, capture_output=True, text=True)


def up():
    down()
    for ns in "tbr":
        sh(f"ip netns add {N}{ns}")
    sh(f"ip link add {N}t0 netns {N}t type veth peer name {N}t1 netns {N}b")
    sh(f"ip link add {N}r0 netns {N}r type veth peer name {N}r1 netns {N}b")
    sh(f"ip -n {N}b link add br0 type bridge")
    for i in ("t1", "r1"):
        sh(f"ip -n {N}b link set {N}{i} master br0 up")
    sh(f"ip -n {N}t link set {N}t0 up && ip -n {N}r link set {N}r0 up && ip -n {N}b link set br0 up")
    for _ in range(200):
        if sh(f"bridge -n {N}b link show").stdout.count("state forwarding") == 2:
            return
        time.sleep(0.05)
    raise SystemExit("the bridge ports never reached forwarding")


def down():
    for ns in "tbr":
        sh(f"ip netns del {N}{ns}", check=False)


def profile(d, method, rate):
    lines = [f"link_speed_bps = 1e9", "[output]"]
    if method.startswith("shaper"):
        lines += ['rate_control = "shaper"', f'shaper = {{ qdisc = "{method[7:]}" }}']
    elif method == "filler":
        lines += ['rate_control = "filler"']
    lines += ["[[stream]]", "size = 128", "[stream.timing]", f"rate_pps = {rate}", f"duration_s = {SECS}"]
    p = os.path.join(d, "p.toml")
    open(p, "w").write("\n".join(lines) + "\n")
    return p


def one(d, method, rate, rnd):
    pcap = os.path.join(d, "rx.pcap")
    cap = subprocess.Popen(
        ["ip", "netns", "exec", f"{N}r", "tcpdump", "-i", f"{N}r0", "-w", pcap, "--time-stamp-precision=nano",
         "-nn", "-U", "udp"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.5)
    args = [G, "run", profile(d, method, rate), "--netns", f"{N}t", "--iface", f"{N}t0", "-q", "--core", "0",
            "--json", os.path.join(d, "r.json")]
    if method.startswith("batch"):
        args += ["--batch", method[5:]]
    r = subprocess.run(args, capture_output=True, text=True)
    time.sleep(1.0)  # a shaper's queue drains after the sender is done
    cap.terminate()
    cap.wait()
    row = {"round": rnd, "method": method, "rate_pps": rate, "run_exit": r.returncode}
    if r.returncode not in (0, 1):
        row["error"] = r.stderr.strip()[-300:]
        return row
    res = json.load(open(os.path.join(d, "r.json")))
    row["held"] = res["verdict"].get("held")
    row["rate_control"] = res["rate_control"]
    a = subprocess.run([G, "analyze", pcap, "--target-pps", str(rate), "--no-latency", "--json",
                        os.path.join(d, "a.json")], capture_output=True, text=True)
    if a.returncode != 0:
        row["error"] = a.stderr.strip()[-300:]
        return row
    m = json.load(open(os.path.join(d, "a.json")))
    s = max(m["streams"], key=lambda s: s["rx_frames"])
    ia = s["interarrival"] or {}
    w100 = [w for w in s.get("rate_jitter", []) if w["packets"] == 100]
    row.update({
        "rx": s["rx_frames"], "sent": res["sent_frames"],
        "rate_error": ia.get("rate_error_rel"), "abs_err_p50_ns": ia.get("abs_err_p50_ns"),
        "abs_err_p99_ns": ia.get("abs_err_p99_ns"), "mse_ns2": ia.get("mse_ns2"),
        "burst_fraction": ia.get("burst_fraction"), "w100_max_pct": w100[0]["max_pct"] if w100 else None,
    })
    return row


def table(rows):
    print(f"{'method':<11} {'rate':>7} {'n':>2} {'rate err %':>11} {'|err| p50':>10} {'|err| p99':>10} "
          f"{'MSE ns2':>9} {'burst %':>8} {'W100 max %':>10} {'lost':>6}")
    for rate in RATES:
        for meth in METHODS:
            rs = [r for r in rows if r["method"] == meth and r["rate_pps"] == rate and "error" not in r]
            if not rs:
                print(f"{meth:<11} {rate:>7}  - (failed: see raw)")
                continue
            med = lambda k: sorted(r[k] for r in rs if r.get(k) is not None)[len(rs) // 2] if any(
                r.get(k) is not None for r in rs) else float("nan")
            print(f"{meth:<11} {rate:>7} {len(rs):>2} {100 * med('rate_error'):>+11.4f} {med('abs_err_p50_ns'):>10} "
                  f"{med('abs_err_p99_ns'):>10} {med('mse_ns2'):>9.3g} {100 * med('burst_fraction'):>8.2f} "
                  f"{med('w100_max_pct'):>10.1f} {max(r['sent'] - r['rx'] for r in rs):>6}")


def main():
    if os.geteuid() != 0:
        raise SystemExit("rate_control.py needs root (namespaces, qdiscs, tcpdump)")
    os.makedirs(os.path.join(ROOT, "bench/results"), exist_ok=True)
    out = os.path.join(ROOT, "bench/results", time.strftime("rate_control-%Y%m%dT%H%M%SZ.jsonl", time.gmtime()))
    rows = []
    up()
    try:
        with tempfile.TemporaryDirectory() as d, open(out, "w") as f:
            head = sh("git -C %s rev-parse --short HEAD" % ROOT, check=False).stdout.strip()
            f.write(json.dumps({"kernel": os.uname().release, "commit": head, "secs": SECS}) + "\n")
            for rnd in range(ROUNDS):
                for rate in RATES:
                    for meth in METHODS:
                        row = one(d, meth, rate, rnd)
                        rows.append(row)
                        f.write(json.dumps(row) + "\n")
                        f.flush()
                        print(json.dumps(row), file=sys.stderr)
    finally:
        down()
    table(rows)
    print(f"raw: {out}")


if __name__ == "__main__":
    main()
