"""Profiles: dict, TOML and the CLI's `check` are one profile; errors name the path."""

from __future__ import annotations

from pathlib import Path

import pytest

import gapless
from conftest import EXAMPLES, examples_checked_alone, gapless_cli, stream


@pytest.mark.parametrize("path", examples_checked_alone(), ids=lambda p: p.name)
def test_dict_toml_and_the_clis_check_are_one_profile(path: Path, tmp_path: Path) -> None:
    from_file = gapless.Profile.from_toml(path)
    as_dict = from_file.to_dict()
    # dict -> Profile -> TOML -> Profile: the same dict.
    again = gapless.Profile.from_toml_string(gapless.Profile(as_dict).to_toml())
    assert again.to_dict() == as_dict, f"expected the TOML round trip of {path.name} to give the same dict"
    # The dict's check is the CLI's check of the file, byte for byte.
    by_cli = gapless_cli("check", str(path)).stdout
    by_dict = gapless.Profile(as_dict, base_dir=EXAMPLES, label=str(path)).check()
    assert by_dict == by_cli, f"expected check of the dict == `gapless check {path.name}`;\n--- cli\n{by_cli}\n--- dict\n{by_dict}"
    # The TOML the dict writes is the same profile for the CLI.
    written = tmp_path / path.name
    gapless.Profile(as_dict).save(written)
    for f in ("gaps.txt", "rate_trace.csv", "replay-sample.pcap"):
        (tmp_path / f).write_bytes((EXAMPLES / f).read_bytes())
    cli_again = gapless_cli("check", str(written)).stdout
    assert cli_again.replace(str(written), str(path)) == by_cli


def test_a_typo_in_a_dict_names_its_path() -> None:
    with pytest.raises(gapless.ProfileError) as e:
        gapless.Profile({"stream": [{"name": "a", "timing": {"rate_pps": 10, "cuont": 5}}]})
    assert e.value.path == "stream[0].timing.cuont", f"expected path stream[0].timing.cuont; got {e.value.path}"
    assert "unknown field `cuont`" in str(e.value) and "count" in str(e.value), str(e.value)
    assert isinstance(e.value, ValueError) and isinstance(e.value, gapless.Error)


def test_a_bad_value_gives_the_clis_message(tmp_path: Path) -> None:
    bad = {"stream": [stream(rate=-5)]}
    with pytest.raises(gapless.ProfileError) as e:
        gapless.Profile(bad, label="p").check()
    assert e.value.path == "stream[0].timing.rate_pps", f"got {e.value.path!r}"
    assert e.value.fix, "expected a fix"
    toml = tmp_path / "p.toml"
    toml.write_text("[[stream]]\nname = \"a\"\nsize = 64\n[stream.timing]\nrate_pps = -5\ncount = 1000\n")
    p = gapless_cli("check", str(toml), check=False)
    assert p.returncode != 0 and str(e.value) in p.stderr, f"expected the CLI to say {e.value}; got {p.stderr}"


def test_a_profile_is_equal_to_itself_through_every_form(tmp_path: Path) -> None:
    d = {"seed": 7, "stream": [stream("x", rate=5000, count=10, size={"list": [64, 128]})]}
    p = gapless.Profile(d)
    p.save(tmp_path / "x.toml")
    assert gapless.Profile.from_toml(tmp_path / "x.toml") == p
    assert p.with_changes(seed=8).to_dict()["seed"] == 8
    assert "x" in repr(p)
