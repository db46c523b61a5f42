"""Each error kind raises its class, with the message and its fields."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import gapless
from conftest import Testbed, require_root, stream

P = {"stream": [stream(count=10)]}


def test_an_unknown_option_is_a_config_error_listing_the_options() -> None:
    with pytest.raises(gapless.ConfigError) as e:
        gapless.run(P, null=True, ifcae="x")
    assert e.value.key == "ifcae" and "iface" in str(e.value), str(e.value)
    assert e.value.kind == "UnknownOption"


def test_values_out_of_range_are_config_errors() -> None:
    with pytest.raises(gapless.ConfigError) as e:
        gapless.run(P, null=True, batch=0)
    assert "batch 0" in str(e.value) and e.value.kind == "Batch", str(e.value)
    with pytest.raises(gapless.ConfigError) as e:
        gapless.run(P, null=True, duration=-1)
    assert e.value.what == "duration (s)" and e.value.value == -1, vars(e.value)
    with pytest.raises(gapless.ConfigError) as e:
        gapless.run(P, null=True, out="x.pcap")
    assert e.value.kind == "TargetConflict"
    with pytest.raises(gapless.ConfigError) as e:
        gapless.run(P)
    assert e.value.kind == "NoTarget" and "no output" in str(e.value)
    with pytest.raises(gapless.ConfigError) as e:
        gapless.run(P, null=True, pace="yes")
    assert e.value.path == "pace", vars(e.value)


def test_a_missing_interface_is_an_interface_error() -> None:
    require_root()
    with pytest.raises(gapless.InterfaceError) as e:
        gapless.run(P, iface="nosuch0")
    assert e.value.iface == "nosuch0" and e.value.kind == "NoSuchInterface", vars(e.value)
    assert isinstance(e.value, OSError)
    with pytest.raises(gapless.InterfaceError) as e:
        gapless.run(P, iface="x0", netns="glpy-none")
    assert e.value.netns == "glpy-none", vars(e.value)


def test_files_that_cannot_be_read_are_file_errors(tmp_path: Path) -> None:
    with pytest.raises(gapless.FileError) as e:
        gapless.analyze(tmp_path / "missing.pcap")
    assert "missing.pcap" in str(e.value), str(e.value)
    (tmp_path / "junk.pcap").write_bytes(b"\xd4\xc3\xb2\xa1" + b"junk" * 3)
    with pytest.raises(gapless.FileError):
        gapless.analyze(tmp_path / "junk.pcap")
    with pytest.raises(gapless.FileError) as e:
        gapless.Profile.from_toml(tmp_path / "none.toml")
    assert e.value.path == str(tmp_path / "none.toml")


def test_a_missing_capability_is_permission_denied() -> None:
    require_root()
    code = (
        "import gapless\n"
        "try:\n"
        "    gapless.run({'stream': [{'size': 64, 'timing': {'rate_pps': 10, 'count': 1}}]}, iface='lo')\n"
        "except gapless.PermissionDenied as e:\n"
        "    assert isinstance(e, PermissionError)\n"
        "    print('denied', e.missing, '|', e)\n"
    )
    p = subprocess.run(["setpriv", "--bounding-set=-net_raw", sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.startswith("denied"), f"expected PermissionDenied; got {p.stdout} {p.stderr}"
    assert "cap_net_raw" in p.stdout, p.stdout


def test_a_calibration_with_no_frames_is_a_run_error(testbed: Testbed) -> None:
    with pytest.raises(gapless.RunError) as e:
        gapless.calibrate(testbed.tx, "lo", tx_netns=testbed.tx_ns, duration=0.5, rate_pps=1000)
    assert e.value.kind == "CalibrationNoFrames" and "no calibration frame arrived" in str(e.value), str(e.value)


def test_a_calibration_stopped_by_ctrl_c_is_interrupted(testbed: Testbed) -> None:
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    with pytest.raises(gapless.Interrupted) as e:
        gapless.calibrate(testbed.tx, testbed.rx, tx_netns=testbed.tx_ns, rx_netns=testbed.rx_ns, duration=5)
    assert "interrupted" in str(e.value), str(e.value)
