"""Profiles: a dict or a TOML file, the same thing.

A profile dict has the TOML file's keys (see the README and ``examples/``). A stream's
``template`` may also be bytes, or any object with ``__bytes__`` such as a Scapy packet:
gapless finds its headers, the field engine works on them by name, and the checksums and
lengths are computed for every frame.
"""

from __future__ import annotations

import copy
import os
import tempfile
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Union

from . import _gapless

PathLike = Union[str, "os.PathLike[str]"]


def _as_frame(template: Any) -> Any:
    """Bytes (or a Scapy packet) as the template table ``{"frame": "<hex>"}``."""
    if isinstance(template, (bytes, bytearray, memoryview)):
        return {"frame": bytes(template).hex()}
    if template is not None and not isinstance(template, (dict, str)) and hasattr(template, "__bytes__"):
        return {"frame": bytes(template).hex()}
    return template


def _frames(spec: Dict[str, Any]) -> Dict[str, Any]:
    """Every stream's and variant's bytes template as a frame table."""
    for stream in spec.get("stream") or []:
        if isinstance(stream, dict):
            if "template" in stream:
                stream["template"] = _as_frame(stream["template"])
            for variant in stream.get("variant") or []:
                if isinstance(variant, dict) and "template" in variant:
                    variant["template"] = _as_frame(variant["template"])
    return spec


class Profile:
    """A traffic profile: streams, their packets, sizes and timing.

    ``Profile(d)`` checks a dict's keys and types (a :class:`gapless.ProfileError` names the
    path of anything wrong); values are checked when the profile is compiled, by
    :meth:`check` or a run. Files a profile names (gap lists, captures) are read relative
    to ``base_dir``. ``label`` is how results and errors name it.

    >>> p = Profile({"stream": [{"name": "a", "size": 64,
    ...                          "timing": {"rate_pps": 1000, "count": 10}}]})
    >>> p.to_dict()["stream"][0]["timing"]["rate_pps"]
    1000.0
    """

    def __init__(
        self,
        spec: Optional[Mapping[str, Any]] = None,
        *,
        base_dir: PathLike = ".",
        label: str = "python",
    ) -> None:
        raw = _frames(copy.deepcopy(dict(spec or {})))
        self._spec: Dict[str, Any] = _gapless.profile_normalize(raw, label)
        self.base_dir = os.fspath(base_dir)
        self.label = label

    @classmethod
    def from_toml(cls, path: PathLike) -> "Profile":
        """Reads a profile file, as ``gapless run FILE`` does."""
        p = Path(path)
        try:
            text = p.read_text()
        except OSError as e:
            from .errors import FileError

            err = FileError(f"cannot read profile {p}: {e}. Fix: check the path (examples/ has profiles to start from)")
            err.kind, err.path = "Unreadable", str(p)
            raise err from e
        return cls.from_toml_string(text, base_dir=p.parent, label=str(path))

    @classmethod
    def from_toml_string(cls, text: str, *, base_dir: PathLike = ".", label: str = "python") -> "Profile":
        """Parses profile TOML text."""
        prof = cls.__new__(cls)
        prof._spec = _gapless.profile_from_toml(text, label)
        prof.base_dir = os.fspath(base_dir)
        prof.label = label
        return prof

    def to_dict(self) -> Dict[str, Any]:
        """The profile as a dict with every default filled in (a copy)."""
        return copy.deepcopy(self._spec)

    def to_toml(self) -> str:
        """The profile as TOML text: ``gapless run`` takes it as it is."""
        return str(_gapless.profile_to_toml(self._spec, self.label))

    def save(self, path: PathLike) -> None:
        """Writes the profile as TOML to ``path``, atomically."""
        _write_atomic(Path(path), self.to_toml())

    def check(self, link_speed_bps: Optional[float] = None) -> str:
        """Compiles the profile and returns what ``gapless check`` prints: each stream's
        schedule, sizes, template and fields. Raises :class:`gapless.ProfileError`."""
        return str(_gapless.profile_check(self._spec, self.base_dir, self.label, link_speed_bps))

    def with_changes(self, **top: Any) -> "Profile":
        """A copy with top-level keys replaced, e.g. ``p.with_changes(seed=7)``."""
        spec = self.to_dict()
        spec.update(top)
        return Profile(spec, base_dir=self.base_dir, label=self.label)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Profile) and self._spec == other._spec

    def __repr__(self) -> str:
        names = [s.get("name") for s in self._spec.get("stream", [])]
        return f"Profile({self.label!r}, streams={names!r})"


ProfileLike = Union[Profile, Mapping[str, Any], str, "os.PathLike[str]"]


def as_profile(p: ProfileLike) -> Profile:
    """A Profile, a dict, or the path of a TOML file, as a Profile."""
    if isinstance(p, Profile):
        return p
    if isinstance(p, Mapping):
        return Profile(p)
    return Profile.from_toml(p)


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or ".")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
