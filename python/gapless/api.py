"""Runs, meters, calibrations and experiments: the engine's calls with keyword options.

Options are the CLI's flags without the dashes (``--rx-netns`` is ``rx_netns``); an
unknown one raises :class:`gapless.ConfigError` listing those there are. Results are the
dicts the CLI writes as JSON. Every call releases the GIL while the engine works, and
Ctrl-C stops it: the call still returns what was measured, marked ``interrupted``.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Type, Union

from . import _gapless
from .profile import PathLike, Profile, ProfileLike, as_profile

Result = Dict[str, Any]


def _options(options: Mapping[str, Any]) -> Dict[str, Any]:
    """Options as the engine reads them: paths as str, tuples as lists, None left out."""
    out: Dict[str, Any] = {}
    for k, v in options.items():
        if v is None:
            continue
        if isinstance(v, os.PathLike):
            v = os.fspath(v)
        elif isinstance(v, tuple):
            v = list(v)
        out[k] = v
    return out


def _by_name(snap: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """The engine's snapshot with its streams keyed by name."""
    if not snap:
        return {}
    snap = dict(snap)
    snap["streams"] = {s["name"]: s for s in snap.get("streams", [])}
    return snap


class Run:
    """A run going on. Use it as a context manager; leaving the block early (an exception,
    Ctrl-C) stops the run and waits for it, so its sockets and qdiscs are put back.

    >>> with gapless.start(prof, iface="gl-tx0", netns="gl-tx") as run:  # doctest: +SKIP
    ...     for snap in run.live(interval=0.5):
    ...         print(snap["total"]["tx"]["rate_pps"])
    >>> res = run.result()  # doctest: +SKIP
    """

    def __init__(self, handle: Any, profile: Profile) -> None:
        self._h = handle
        self.profile = profile

    def snapshot(self) -> Dict[str, Any]:
        """The run as it stands: ``elapsed_s``, ``total`` and ``streams`` (by name), each
        with ``tx`` (sent, bytes, rate_pps, lag_ns, late_over_gap) and, when metered, ``rx``
        (received, lost, reordered, duplicated, latency_p50_ns, latency_p99_ns, rate_pps)."""
        return _by_name(self._h.snapshot())

    def live(self, interval: float = 0.5) -> Iterator[Dict[str, Any]]:
        """Yields a snapshot every ``interval`` seconds until the run ends, then the last.
        Ctrl-C stops the run and raises KeyboardInterrupt here."""
        if not interval > 0:
            raise ValueError(f"interval {interval}: give a positive number of seconds")
        while True:
            ended = bool(self._h.wait(interval))
            yield self.snapshot()
            if ended:
                return

    def stop(self) -> None:
        """Asks the run to end now; it still reports what it did."""
        self._h.stop()

    @property
    def done(self) -> bool:
        """Whether the run has ended."""
        return bool(self._h.done())

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Waits up to ``timeout`` seconds (None: to the end); True if the run has ended."""
        return bool(self._h.wait(timeout))

    def result(self) -> Result:
        """Waits for the end and returns the result (the JSON ``gapless run --json`` writes).
        Ctrl-C stops the run and the result comes back marked ``interrupted``. A run that
        failed raises its error, whose ``result`` attribute has what was measured."""
        r: Result = self._h.result()
        return r

    def __enter__(self) -> "Run":
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        if exc_type is not None:
            self.stop()
        try:
            self._h.result()
        except Exception:
            if exc_type is None:
                raise


def start(profile: ProfileLike, **options: Any) -> Run:
    """Starts a run and returns at once; see :class:`Run`.

    Where to send: ``iface`` (with ``netns``), ``out`` (a pcap file of the scheduled
    departures), or ``null=True`` (the engine alone), else the profile's ``[output]``.
    Other options: ``duration``, ``seed``, ``pace`` (bool), ``batch``, ``core``, ``cores``,
    ``split_cbr``, ``rt_priority``, ``backend`` ("afpacket"/"afxdp"), ``tx_method``,
    ``xdp_mode``, ``xdp_queue``, ``rate_control`` ("software", "nic", "filler",
    "launch-time", "shaper"), ``tx_timestamps`` ("kernel"/"hardware"). To meter while
    sending: ``rx`` (an interface), ``rx_netns``, ``rx_also`` (more ports the same meter
    reads, each ``"NETNS/IFACE"``: a failover's backup), ``rx_core``, ``rx_linger``,
    ``timestamps``, ``rx_backend``, ``rx_queue``, ``xdp_attach``, ``xdp_stamp``, ``target_pps``,
    ``latency_unit_ns``, ``calibration`` (a file from :func:`calibrate`),
    ``use_invalid_calibration``, ``signed_only``, ``warmup`` (seconds not metered). Link and
    route changes during the run: ``events``, a list of the CLI's ``--event`` strings, e.g.
    ``["1.2s link down gl-dut/gl-d1", "1.45s link up gl-dut/gl-d1"]``.
    """
    prof = as_profile(profile)
    handle = _gapless.start(prof.to_dict(), prof.base_dir, prof.label, _options(options))
    return Run(handle, prof)


def run(profile: ProfileLike, **options: Any) -> Result:
    """Runs a profile to its end and returns the result dict (what ``gapless run --json``
    writes). Takes the options of :func:`start`. Ctrl-C stops it and the result comes back
    marked ``interrupted``.

    >>> res = gapless.run({"stream": [{"name": "a", "size": 64,
    ...     "timing": {"rate_pps": 100_000, "count": 1000}}]}, out="a.pcap")  # doctest: +SKIP
    >>> res["sent_frames"]  # doctest: +SKIP
    1000
    """
    return start(profile, **options).result()


@contextlib.contextmanager
def _targets(profile: Optional[Union[ProfileLike, Result]]) -> Iterator[Optional[str]]:
    """A path the meter reads stream names and targets from: the file given, or a
    temporary one for a Profile, a dict or a result (removed after)."""
    if profile is None or isinstance(profile, (str, os.PathLike)):
        yield None if profile is None else os.fspath(profile)
        return
    result = _is_result(profile)
    text = json.dumps(profile) if result else as_profile(profile).to_toml()
    fd, path = tempfile.mkstemp(prefix="gapless-targets-", suffix=".json" if result else ".toml")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    try:
        yield path
    finally:
        os.unlink(path)


def _is_result(x: Any) -> bool:
    return isinstance(x, Mapping) and "sent_frames" in x


def analyze(
    file: PathLike,
    *,
    profile: Optional[Union[ProfileLike, Result]] = None,
    latency: bool = True,
    **options: Any,
) -> Result:
    """Meters a capture (pcap or pcapng, any timestamp resolution) or a CSV of timestamps,
    as ``gapless analyze`` does, and returns the meter's report.

    ``profile``: a profile or a run's result (or either's file) naming the streams and
    their target rates. Options: ``target_pps``, ``latency_unit_ns``, ``calibration``,
    ``use_invalid_calibration``, ``signed_only``, ``warmup``.
    """
    with _targets(profile) as targets:
        req = dict(options, file=file, profile=targets, latency=latency)
        r: Result = _gapless.analyze(_options(req))
        return r


def measure(
    iface: str,
    *,
    netns: Optional[str] = None,
    duration: Optional[float] = None,
    profile: Optional[Union[ProfileLike, Result]] = None,
    **options: Any,
) -> Result:
    """Meters an interface live, as ``gapless measure`` does, until ``duration`` seconds
    have passed or Ctrl-C (then the report is marked ``interrupted``); returns the meter's
    report. ``profile``: a profile or a run's result naming the streams and their targets.
    Options: ``core``, ``timestamps``, ``rx_backend``, ``rx_queue``, ``xdp_attach``, ``xdp_stamp``,
    ``target_pps``, ``latency_unit_ns``, ``calibration``, ``use_invalid_calibration``,
    ``signed_only``, ``warmup``. A meter that fails on the way raises
    :class:`gapless.RunError` with the report so far as ``result``.
    """
    with _targets(profile) as targets:
        req = dict(options, iface=iface, netns=netns, duration=duration, profile=targets)
        r: Result = _gapless.measure(_options(req))
        return r


def calibrate(
    tx: str,
    rx: str,
    *,
    tx_netns: Optional[str] = None,
    rx_netns: Optional[str] = None,
    out: Optional[PathLike] = None,
    **options: Any,
) -> Result:
    """Measures this setup's own latency offset and precision floor over a direct link
    (``gapless testbed up`` makes one: ``tx="gl-tx0", tx_netns="gl-tx", rx="gl-rx0",
    rx_netns="gl-rx"``). Returns the calibration (its ``run`` key holds the run's result)
    and writes it to ``out`` when given, for ``calibration=`` of later runs.
    Options: ``rate_pps`` (10000), ``duration`` (5 s), ``core``, ``timestamps``,
    ``rx_backend``, ``rx_queue``, ``xdp_attach``, ``xdp_stamp``.
    """
    req = dict(options, tx=tx, rx=rx, tx_netns=tx_netns, rx_netns=rx_netns)
    r: Result = _gapless.calibrate(_options(req), None if out is None else os.fspath(out))
    return r


def _experiment_spec(spec: Mapping[str, Any]) -> Dict[str, Any]:
    """An experiment dict with its profile (a Profile, a dict or a path) as the file has it."""
    out = dict(spec)
    p = out.get("profile")
    if isinstance(p, os.PathLike):
        out["profile"] = os.fspath(p)
    elif isinstance(p, (Profile, Mapping)):
        # An inline profile is read as TOML values, which have no null.
        out["profile"] = _drop_none(as_profile(p).to_dict())
    return _options(out)


def _drop_none(x: Any) -> Any:
    """A dict or list without its None values, at any depth."""
    if isinstance(x, Mapping):
        return {k: _drop_none(v) for k, v in x.items() if v is not None}
    if isinstance(x, list):
        return [_drop_none(v) for v in x]
    return x


def experiment(
    spec: Union[PathLike, Mapping[str, Any]],
    *,
    on_trial: Optional[Callable[[Dict[str, Any]], None]] = None,
    report_dir: Optional[PathLike] = None,
    base_dir: PathLike = ".",
) -> Result:
    """Runs an experiment (a file, or a dict with the file's keys: ``method``, ``profile``,
    ``tx``, ``rx``, ``trial``, ``rfc2544``/``sweep``, ...) and returns its result file as a
    dict (what ``gapless experiment --json`` writes: ``trials``, and ``rfc2544``, ``sweep``
    or ``repeat`` with the figures). ``on_trial`` is called with each trial as it is judged;
    ``report_dir`` gets the CSV and plots. Ctrl-C stops it and the trials so far come back
    (``stopped`` is true). A trial that cannot run (a missing interface) raises
    :class:`gapless.RunError` whose ``result`` has the trials before it."""
    if isinstance(spec, Mapping):
        arg: Any = _experiment_spec(spec)
        label = str(spec.get("name") or "python experiment")
    else:
        arg, label = os.fspath(spec), os.fspath(spec)
    rd = None if report_dir is None else os.fspath(report_dir)
    r: Result = _gapless.experiment(arg, os.fspath(base_dir), label, on_trial, rd)
    return r


def _port(p: Union[str, Mapping[str, Any]], netns: Optional[str]) -> Dict[str, Any]:
    """A port as the experiment file has it: an interface name (and its namespace), or a table."""
    return dict(p) if isinstance(p, Mapping) else _options({"iface": p, "netns": netns})


def _method(
    method: str,
    table: str,
    profile: ProfileLike,
    tx: Optional[Union[str, Mapping[str, Any]]],
    rx: Optional[Union[str, Mapping[str, Any]]],
    tx_netns: Optional[str],
    rx_netns: Optional[str],
    common: Dict[str, Any],
    params: Dict[str, Any],
) -> Result:
    spec: Dict[str, Any] = {"method": method, "profile": profile}
    if tx is not None:
        spec["tx"] = _port(tx, tx_netns)
    if rx is not None:
        spec["rx"] = _port(rx, rx_netns)
    for k in ("name", "trial", "calibration", "dut", "ports", "pairs"):
        if common.get(k) is not None:
            spec[k] = common[k]
    if params:
        spec[table] = params
    return experiment(spec, on_trial=common.get("on_trial"), report_dir=common.get("report_dir"))


def rfc2544(
    profile: ProfileLike,
    *,
    tx: Optional[Union[str, Mapping[str, Any]]] = None,
    rx: Optional[Union[str, Mapping[str, Any]]] = None,
    tx_netns: Optional[str] = None,
    rx_netns: Optional[str] = None,
    ports: Optional[Sequence[Mapping[str, Any]]] = None,
    pairs: Optional[Union[str, Sequence[Mapping[str, Any]]]] = None,
    name: Optional[str] = None,
    trial: Optional[Mapping[str, Any]] = None,
    calibration: Optional[str] = None,
    dut: Optional[Mapping[str, Any]] = None,
    on_trial: Optional[Callable[[Dict[str, Any]], None]] = None,
    report_dir: Optional[PathLike] = None,
    **params: Any,
) -> Result:
    """RFC 2544 (throughput, latency, frame loss rate, back-to-back) against a device
    between ``tx`` and ``rx``. ``params`` are the ``[rfc2544]`` table's keys:
    ``tests``, ``frame_sizes``, ``loss_tolerance_pct``, ``max_rate_pps`` or
    ``max_rate_bps``, ``min_rate_pps``, ``resolution_pct``/``resolution_pps``, ... ;
    ``trial`` is the ``[trial]`` table (``duration_s``, ``warmup_s``, ``repetitions``, ...).
    Instead of ``tx``/``rx``, ``ports`` (a list of ``{"iface", "netns"}``) with ``pairs``
    ("bidirectional", "full-mesh", or ``[{"from": 0, "to": 1}, ...]``) runs every direction
    at once; the result's ``directions`` has each one's figures."""
    common = dict(name=name, trial=trial, calibration=calibration, dut=dut, on_trial=on_trial, report_dir=report_dir,
                  ports=None if ports is None else [dict(p) for p in ports], pairs=pairs)
    return _method("rfc2544", "rfc2544", profile, tx, rx, tx_netns, rx_netns, common, params)


def sweep(
    profile: ProfileLike,
    *,
    tx: Optional[Union[str, Mapping[str, Any]]] = None,
    rx: Optional[Union[str, Mapping[str, Any]]] = None,
    tx_netns: Optional[str] = None,
    rx_netns: Optional[str] = None,
    ports: Optional[Sequence[Mapping[str, Any]]] = None,
    pairs: Optional[Union[str, Sequence[Mapping[str, Any]]]] = None,
    name: Optional[str] = None,
    trial: Optional[Mapping[str, Any]] = None,
    calibration: Optional[str] = None,
    dut: Optional[Mapping[str, Any]] = None,
    on_trial: Optional[Callable[[Dict[str, Any]], None]] = None,
    report_dir: Optional[PathLike] = None,
    **params: Any,
) -> Result:
    """A load sweep: ``params`` are the ``[sweep]`` table's keys (``parameter`` = "rate",
    "burst", "size" or "pattern"; ``values`` or ``from``/``to``/``steps``; ``curves``).
    Each point runs ``trial["repetitions"]`` trials; the result has latency percentiles and
    loss per point with confidence intervals."""
    common = dict(name=name, trial=trial, calibration=calibration, dut=dut, on_trial=on_trial, report_dir=report_dir,
                  ports=None if ports is None else [dict(p) for p in ports], pairs=pairs)
    return _method("sweep", "sweep", profile, tx, rx, tx_netns, rx_netns, common, params)


def mlrsearch(
    profile: ProfileLike,
    *,
    tx: Optional[Union[str, Mapping[str, Any]]] = None,
    rx: Optional[Union[str, Mapping[str, Any]]] = None,
    tx_netns: Optional[str] = None,
    rx_netns: Optional[str] = None,
    ports: Optional[Sequence[Mapping[str, Any]]] = None,
    pairs: Optional[Union[str, Sequence[Mapping[str, Any]]]] = None,
    name: Optional[str] = None,
    trial: Optional[Mapping[str, Any]] = None,
    calibration: Optional[str] = None,
    dut: Optional[Mapping[str, Any]] = None,
    on_trial: Optional[Callable[[Dict[str, Any]], None]] = None,
    report_dir: Optional[PathLike] = None,
    **params: Any,
) -> Result:
    """MLRsearch (RFC 9971): every goal's conditional throughput in one search. ``params``
    are the ``[mlrsearch]`` table's keys: ``goals`` (a list of dicts with ``name`` and
    ``loss_ratio``, optionally ``exceed_ratio``, ``width``, ``final_trial_duration_s``,
    ``duration_sum_s``, ...), ``max_rate_pps``, ``min_rate_pps``, ``final_trial_duration_s``,
    ``width_goal``, ``latency_at``, ... The result's ``mlrsearch`` has ``goals`` (each with
    ``conditional_throughput_pps``, ``lower_bound_pps``, ``upper_bound_pps``), ``trials``
    and ``trial_seconds``. With ``ports`` and ``pairs`` (see :func:`rfc2544`) the loads are
    the aggregate over the directions, and ``directions`` has each one's loss and latency."""
    common = dict(name=name, trial=trial, calibration=calibration, dut=dut, on_trial=on_trial, report_dir=report_dir,
                  ports=None if ports is None else [dict(p) for p in ports], pairs=pairs)
    return _method("mlrsearch", "mlrsearch", profile, tx, rx, tx_netns, rx_netns, common, params)


def _load(result: Union[Result, PathLike]) -> Result:
    if isinstance(result, Mapping):
        return dict(result)
    with open(result) as f:
        loaded: Result = json.load(f)
    return loaded


def report(result: Union[Result, PathLike], out_dir: PathLike = "report") -> int:
    """Writes the CSV exports and plots (PNG and SVG) of a metered result (a run's with
    ``rx``, or a meter's) into ``out_dir``, as ``gapless report`` does. Returns how many
    files were written."""
    os.makedirs(out_dir, exist_ok=True)
    return int(_gapless.report(_load(result), os.fspath(out_dir)))


def summary(result: Union[Result, PathLike]) -> str:
    """The summary the CLI prints for a result: what was sent, what the meter saw, and the
    verdict (whether the schedule was held, and why not); for an experiment's result, its
    figures (NDR and PDR first for MLRsearch) and warnings."""
    return str(_gapless.summary(_load(result)))


def to_frame(result: Union[Result, PathLike]) -> Dict[str, Any]:
    """A metered result as pandas DataFrames (pandas is optional: ImportError without it):
    ``streams`` (one row per stream), ``series`` (per second and stream), ``latency`` and
    ``interarrival`` (histogram buckets per stream: lo_ns, hi_ns, count)."""
    import pandas as pd  # type: ignore[import-untyped,unused-ignore]

    r = _load(result)
    rx = r.get("rx", r) or {}
    streams = rx.get("streams", [])
    flat: List[Dict[str, Any]] = []
    for s in streams:
        row = {k: v for k, v in s.items() if not isinstance(v, (dict, list))}
        for part in ("seq", "latency", "interarrival"):
            for k, v in (s.get(part) or {}).items():
                if not isinstance(v, (dict, list)) and not k.startswith("histogram"):
                    row[f"{part}.{k}"] = v
        flat.append(row)
    series = [dict(p, stream=s["name"]) for s in streams for p in s.get("series", [])]
    hists: Dict[str, List[Dict[str, Any]]] = {"latency": [], "interarrival": []}
    for h in _gapless.histograms(rx) if streams else []:
        for kind in hists:
            for lo, hi, c in h[kind] or []:
                hists[kind].append({"stream": h["name"], "lo_ns": lo, "hi_ns": hi, "count": c})
    return {
        "streams": pd.DataFrame(flat),
        "series": pd.DataFrame(series),
        "latency": pd.DataFrame(hists["latency"], columns=["stream", "lo_ns", "hi_ns", "count"]),
        "interarrival": pd.DataFrame(hists["interarrival"], columns=["stream", "lo_ns", "hi_ns", "count"]),
    }
