"""gapless: a precise, scriptable packet generator and traffic meter.

The same engine as the ``gapless`` command line, so the numbers are the same::

    import gapless
    prof = gapless.Profile.from_toml("examples/cbr.toml")
    res = gapless.run(prof, out="cbr.pcap")            # a dict: the JSON result
    with gapless.start(prof, iface="gl-tx0", netns="gl-tx",
                       rx="gl-rx0", rx_netns="gl-rx") as run:
        for snap in run.live(interval=0.5):
            print(snap["total"]["tx"]["rate_pps"])
    res = run.result()
    print(gapless.summary(res))

Profiles are dicts with the TOML file's keys (:class:`Profile`); a stream's template may
be bytes or a Scapy packet. Results are dicts; :func:`to_frame` makes pandas DataFrames of
them. Errors are :class:`Error` subclasses carrying the message and its fields.
"""

from ._gapless import __version__
from .api import (
    Run,
    analyze,
    calibrate,
    experiment,
    measure,
    mlrsearch,
    report,
    rfc2544,
    run,
    start,
    summary,
    sweep,
    to_frame,
)
from .errors import (
    ConfigError,
    Error,
    FileError,
    InterfaceError,
    Interrupted,
    PermissionDenied,
    ProfileError,
    RunError,
    SystemCallError,
)
from .profile import Profile

__all__ = [
    "__version__",
    "Profile",
    "Run",
    "run",
    "start",
    "analyze",
    "measure",
    "calibrate",
    "experiment",
    "rfc2544",
    "mlrsearch",
    "sweep",
    "report",
    "summary",
    "to_frame",
    "Error",
    "ProfileError",
    "ConfigError",
    "PermissionDenied",
    "InterfaceError",
    "FileError",
    "RunError",
    "Interrupted",
    "SystemCallError",
]
