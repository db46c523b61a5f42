"""The stubs and the examples pass mypy --strict, and stubtest agrees with the module."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO


def test_mypy_strict_on_the_package_and_the_examples() -> None:
    p = subprocess.run([sys.executable, "-m", "mypy", "--strict", "examples/python", "python/gapless"], cwd=REPO, capture_output=True, text=True)
    assert p.returncode == 0, f"expected mypy --strict to pass; got:\n{p.stdout}{p.stderr}"


def test_stubtest_finds_the_stub_true_to_the_module() -> None:
    p = subprocess.run([sys.executable, "-m", "mypy.stubtest", "gapless._gapless"], cwd=REPO / "python" / "tests", capture_output=True, text=True)
    assert p.returncode == 0, f"expected stubtest to pass; got:\n{p.stdout}{p.stderr}"


def test_help_is_useful() -> None:
    import gapless

    for f in (gapless.run, gapless.start, gapless.analyze, gapless.calibrate, gapless.experiment, gapless.rfc2544, gapless.report, gapless.to_frame, gapless.Profile, gapless.Run.live):
        assert f.__doc__ and len(f.__doc__) > 80, f"expected a docstring on {f.__name__}"
