"""The exceptions gapless raises.

Every error is a :class:`gapless.Error`. ``str(e)`` is the whole message: what is wrong and
how to fix it, as the CLI prints it. ``e.kind`` names what failed (the engine's error kind,
e.g. ``"NoSuchInterface"`` or ``"OutOfRange"``), and each class adds the fields a script
matches on. Each class is also the matching built-in exception (a :class:`ProfileError` is
a ``ValueError``, a :class:`PermissionDenied` a ``PermissionError``), so generic handlers
catch them too.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional


class Error(Exception):
    """Base of every gapless error: ``message`` (the text) and ``kind`` (what failed)."""

    message: str
    kind: str

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.kind = ""

    def __str__(self) -> str:
        return self.message


class ProfileError(Error, ValueError):
    """The profile does not fit: ``path`` is the key path (``stream[0].timing.rate_pps``),
    ``problem`` what is wrong with it and ``fix`` how to mend it (where known)."""

    path: Optional[str] = None
    problem: Optional[str] = None
    fix: Optional[str] = None
    origin: Optional[str] = None
    experiment: Optional[str] = None


class ConfigError(Error, ValueError):
    """An option is out of range or does not go with another (``path``/``key`` names it)."""

    path: Optional[str] = None
    problem: Optional[str] = None
    key: Optional[str] = None
    known: Optional[str] = None
    what: Optional[str] = None
    value: Optional[float] = None
    want: Optional[str] = None
    core: Optional[int] = None
    allowed: Optional[List[int]] = None


class PermissionDenied(Error, PermissionError):
    """The process lacks a privilege: ``missing`` names the capabilities, ``fix`` how to get them."""

    missing: Optional[str] = None
    fix: Optional[str] = None


class InterfaceError(Error, OSError):
    """An interface or network namespace is missing, down, or refused what was asked of it."""

    iface: Optional[str] = None
    netns: Optional[str] = None


class FileError(Error, OSError):
    """A file cannot be read, is not what it should be, or cannot be written (``path``)."""

    path: Optional[str] = None
    problem: Optional[str] = None
    fix: Optional[str] = None


class RunError(Error, RuntimeError):
    """The run, meter or calibration failed on the way. ``result`` holds what was measured
    until then (a result dict), when there is one."""

    result: Optional[Dict[str, Any]] = None


class Interrupted(Error):
    """Stopped before there was anything to keep (``what`` names what was stopped)."""

    what: Optional[str] = None


class SystemCallError(Error, OSError):
    """A system call or a system command (``ip``, ``tc``) failed."""


__all__ = [
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
