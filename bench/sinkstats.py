#!/usr/bin/env python3
"""Sink-side statistics from a capture: an independent check of what gapless (or a peer tool) sent.

Reads a pcap (micro- or nanosecond) as tcpdump writes it, groups frames into flows (by the
gapless signature, or all unsigned UDP/TCP frames as one flow), and reports per flow:
  - frames, and from signatures: lost, reordered, duplicated;
  - accuracy: mean rate against the target (relative error);
  - precision: |inter-arrival - target gap| at p50/p99/p99.9, MSE in ns^2, burst fraction
    (gaps under half the target), and the gaps' coefficient of variation;
  - one-way latency (capture timestamp - signature TX timestamp) when both are CLOCK_REALTIME.
The metric names follow Emmerich et al., "Mind the Gap" (ANCS 2017) and Kundel et al. (NOMS 2020).
Python standard library only.
"""
import argparse
import json
import math
import struct
import sys

MAGIC = b"\x67\x4c"


def read_pcap(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 24:
        sys.exit(f"sinkstats: {path}: not a pcap file (too short)")
    m = data[:4]
    table = {
        b"\xd4\xc3\xb2\xa1": ("<", 1000), b"\xa1\xb2\xc3\xd4": (">", 1000),
        b"\x4d\x3c\xb2\xa1": ("<", 1), b"\xa1\xb2\x3c\x4d": (">", 1),
    }
    if m not in table:
        sys.exit(f"sinkstats: {path}: not a pcap file (magic {m.hex()}); pcapng is not read here: "
                 f"convert with `editcap -F pcap IN OUT`")
    end, mult = table[m]
    linktype = struct.unpack(end + "I", data[20:24])[0]
    if linktype != 1:
        sys.exit(f"sinkstats: {path}: link type {linktype}, expected Ethernet (1)")
    off = 24
    hdr = struct.Struct(end + "IIII")
    while off + 16 <= len(data):
        sec, frac, incl, _orig = hdr.unpack_from(data, off)
        off += 16
        yield sec * 1_000_000_000 + frac * mult, data[off:off + incl]
        off += incl


def parse(frame):
    """Returns (kind, key, l4_payload) or None. kind: 'udp', 'tcp', 'icmp', 'other'."""
    if len(frame) < 14:
        return None
    et = struct.unpack_from(">H", frame, 12)[0]
    off = 14
    while et in (0x8100, 0x88A8) and len(frame) >= off + 4:
        et = struct.unpack_from(">H", frame, off + 2)[0]
        off += 4
    if et == 0x0800 and len(frame) >= off + 20:
        ihl = (frame[off] & 0x0F) * 4
        total = struct.unpack_from(">H", frame, off + 2)[0]
        proto = frame[off + 9]
        src, dst = frame[off + 12:off + 16], frame[off + 16:off + 20]
        l4 = off + ihl
        end = off + total
    elif et == 0x86DD and len(frame) >= off + 40:
        plen = struct.unpack_from(">H", frame, off + 4)[0]
        proto = frame[off + 6]
        src, dst = frame[off + 8:off + 24], frame[off + 24:off + 40]
        l4 = off + 40
        end = l4 + plen
    else:
        return ("other", None, b"")
    end = min(end, len(frame))
    if proto == 17 and end >= l4 + 8:
        sp, dp = struct.unpack_from(">HH", frame, l4)
        return ("udp", (src, dst, 17, sp, dp), frame[l4 + 8:end])
    if proto == 6 and end >= l4 + 20:
        sp, dp = struct.unpack_from(">HH", frame, l4)
        doff = (frame[l4 + 12] >> 4) * 4
        return ("tcp", (src, dst, 6, sp, dp), frame[l4 + doff:end])
    if proto in (1, 58) and end >= l4 + 8:
        t = frame[l4]
        echo = (proto == 1 and t in (0, 8)) or (proto == 58 and t in (128, 129))
        # ICMP errors quote the offending frame, signature included: never ours.
        return ("icmp" if echo else "icmp-error", None, frame[l4 + 8:end] if echo else b"")
    return ("other", None, b"")


def pct(sorted_vals, q):
    if not sorted_vals:
        return float("nan")
    i = min(len(sorted_vals) - 1, max(0, math.ceil(q * len(sorted_vals)) - 1))
    return sorted_vals[i]


class Flow:
    def __init__(self, name):
        self.name = name
        self.times = []
        self.seqs = []
        self.lat = []

    def stats(self, target_pps):
        n = len(self.times)
        out = {"flow": self.name, "frames": n}
        if self.seqs:
            # Unwrap 32-bit sequence numbers.
            unwrapped, base, last = [], 0, None
            for s in self.seqs:
                if last is not None and s < last and last - s > 1 << 31:
                    base += 1 << 32
                elif last is not None and s > last and s - last > 1 << 31:
                    base -= 1 << 32
                unwrapped.append(base + s)
                last = s
            seen, dup, reord, hi = set(), 0, 0, -1
            for s in unwrapped:
                if s in seen:
                    dup += 1
                    continue
                seen.add(s)
                if s < hi:
                    reord += 1
                hi = max(hi, s)
            expected = max(seen) - min(seen) + 1
            out.update(first_seq=min(seen), lost=expected - len(seen), reordered=reord, duplicated=dup)
        if n >= 2:
            gaps = [b - a for a, b in zip(self.times, self.times[1:])]
            span = self.times[-1] - self.times[0]
            rate = (n - 1) * 1e9 / span if span > 0 else float("inf")
            mean = sum(gaps) / len(gaps)
            var = sum((g - mean) ** 2 for g in gaps) / len(gaps)
            sg = sorted(gaps)
            out.update(rate_pps=rate, gap_p1_ns=pct(sg, 0.01), gap_p50_ns=pct(sg, 0.5), gap_p99_ns=pct(sg, 0.99),
                       gap_cv=(math.sqrt(var) / mean) if mean > 0 else float("nan"))
            if target_pps:
                tg = 1e9 / target_pps
                err = sorted(abs(g - tg) for g in gaps)
                out.update(target_pps=target_pps, rate_error_rel=rate / target_pps - 1,
                           abs_err_p50_ns=pct(err, 0.5), abs_err_p99_ns=pct(err, 0.99), abs_err_p999_ns=pct(err, 0.999),
                           mse_ns2=sum((g - tg) ** 2 for g in gaps) / len(gaps),
                           burst_fraction=sum(1 for g in gaps if g < tg / 2) / len(gaps))
        if self.lat:
            sl = sorted(self.lat)
            out.update(latency_p50_ns=pct(sl, 0.5), latency_p99_ns=pct(sl, 0.99), latency_max_ns=sl[-1])
        return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("pcap")
    ap.add_argument("--target-pps", type=float, help="target rate for every flow (precision metrics)")
    ap.add_argument("--result", help="a gapless result JSON: per-stream targets and names")
    ap.add_argument("--unsigned", choices=["udp", "tcp", "any"], default="any",
                    help="which unsigned frames form the 'unsigned' flow (peer tools)")
    ap.add_argument("--dport", type=int, help="only unsigned frames to this L4 port")
    ap.add_argument("--json", help="write the statistics here as JSON")
    a = ap.parse_args()

    names, targets, pattern = {}, {}, {}
    if a.result:
        r = json.load(open(a.result))
        for st in r["streams"]:
            names[st["id"]] = st["name"]
            targets[st["id"]] = st["target_pps"]
        for i, sp in enumerate(r["profile"].get("stream", [])):
            pattern[i] = sp.get("timing", {}).get("pattern", "cbr")
    flows, foreign = {}, 0
    for ts, frame in read_pcap(a.pcap):
        p = parse(frame)
        if p is None or p[0] in ("other", "icmp-error"):
            foreign += 1
            continue
        kind, key, payload = p
        if len(payload) >= 16 and payload[-16:-14] == MAGIC:
            sid, seq, tx = struct.unpack(">HIQ", payload[-14:])
            f = flows.setdefault(("sig", sid), Flow(names.get(sid, f"stream {sid}")))
            f.times.append(ts)
            f.seqs.append(seq)
            f.lat.append(ts - tx)
            continue
        if (a.unsigned != "any" and kind != a.unsigned) or (a.dport and (key is None or key[4] != a.dport)):
            foreign += 1
            continue
        f = flows.setdefault(("unsigned", 0), Flow("unsigned"))
        f.times.append(ts)
    results = []
    for key in sorted(flows):
        sid = key[1] if key[0] == "sig" else None
        t = a.target_pps or (targets.get(sid) if sid is not None else None)
        s = flows[key].stats(t)
        s["pattern"] = pattern.get(sid, "?") if sid is not None else "?"
        # Latencies are meaningful only when TX stamps are CLOCK_REALTIME (live runs).
        if s.get("latency_p50_ns", 0) < 0 or s.get("latency_p50_ns", 0) > 10e9:
            for k in ("latency_p50_ns", "latency_p99_ns", "latency_max_ns"):
                s.pop(k, None)
        results.append(s)
    print(f"{'flow':<14}{'frames':>9}{'lost':>7}{'reord':>6}{'dup':>5}{'rate':>13}{'rate err':>10}"
          f"{'|err| p50':>11}{'p99':>10}{'p99.9':>10}{'MSE ns²':>12}{'burst':>8}{'gap cv':>8}{'lat p50':>10}{'lat p99':>10}")
    for s in results:
        def g(k, fmt="{:.0f}"):
            v = s.get(k)
            return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else fmt.format(v)
        print(f"{s['flow']:<14}{s['frames']:>9}{g('lost'):>7}{g('reordered'):>6}{g('duplicated'):>5}"
              f"{g('rate_pps', '{:.1f}'):>13}{g('rate_error_rel', '{:+.4%}'):>10}"
              f"{g('abs_err_p50_ns'):>11}{g('abs_err_p99_ns'):>10}{g('abs_err_p999_ns'):>10}{g('mse_ns2', '{:.3g}'):>12}"
              f"{g('burst_fraction', '{:.2%}'):>8}{g('gap_cv', '{:.3f}'):>8}{g('latency_p50_ns'):>10}{g('latency_p99_ns'):>10}")
    print(f"foreign frames (ARP, ICMP errors, others): {foreign}")
    print("times in ns; precision columns (|err|, MSE, burst) compare each gap with the constant target gap "
          "and are meaningful for CBR flows; a Poisson flow shows gap cv ≈ 1")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"flows": results, "foreign": foreign}, f, indent=1)


if __name__ == "__main__":
    main()
