"""Median latency of each burst size relative to CBR (burst 1) at the same offered load, as
Mind the Gap's Fig. 1 plots it, from a `gapless sweep ... --curves burst=1,...` result."""
import json
import sys

r = json.load(open(sys.argv[1]))
curves = {}
for c in r["sweep"]:
    burst = c["curve"]["burst"]
    curves[burst] = {p["settings"][-1]["rate"]: p for p in c["points"]}
cbr = curves[1]
rates = sorted(cbr)
print("\nmedian latency (mean over repetitions of each trial's p50), and relative to CBR")
print("rate_pps " + " ".join(f"{'burst ' + str(b):>22}" for b in sorted(curves)))
for rate in rates:
    row = []
    for b in sorted(curves):
        p = curves[b].get(rate)
        est = p and p.get("latency_p50_ns")
        base = cbr[rate].get("latency_p50_ns")
        if not est or not base:
            row.append(f"{'-':>22}")
            continue
        rel = est["mean"] / base["mean"]
        hw = est.get("half_width") or 0.0
        row.append(f"{est['mean'] / 1e3:8.1f}±{hw / 1e3:5.1f} µs ×{rel:5.2f}")
    print(f"{rate:8.0f} " + " ".join(row))
invalid = sum(1 for t in r["trials"] if not t["valid"])
print(f"\n{len(r['trials'])} trials, {invalid} marked invalid (sender more than 0.1 % over one gap late)")
