#!/usr/bin/env python3
"""Writes crates/gapless-serve/proto/otg.fds, the FileDescriptorSet of otg.proto (service
otg.Openapi) and the two files it imports, from the snappi wheel pinned below. The gRPC
listener reads otg.proto's messages from it (prost-reflect), so no code is generated.

  .venv/bin/python scripts/otg_descriptor.py          # regenerate (after changing the pin)
  .venv/bin/python scripts/otg_descriptor.py --check  # exit 1 if the committed file differs

snappi's wheel ships otg_pb2.py, whose DESCRIPTOR.serialized_pb is the FileDescriptorProto of
otg.proto; protobuf's own modules give descriptor.proto and empty.proto.
"""
import os
import sys

SNAPPI = "1.62.0"  # the version pyproject.toml pins for the tests
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crates", "gapless-serve", "proto", "otg.fds")


def descriptor_set() -> bytes:
    import snappi  # type: ignore[import-untyped]
    from google.protobuf import descriptor_pb2, empty_pb2
    from snappi import otg_pb2  # type: ignore[import-untyped]

    have = getattr(snappi, "__version__", None) or __import__("importlib.metadata").metadata.version("snappi")
    if have != SNAPPI:
        sys.exit(f"expected snappi {SNAPPI}, the pinned version; got {have}. Fix: pip install snappi=={SNAPPI}")
    fds = descriptor_pb2.FileDescriptorSet()
    for d in (descriptor_pb2.DESCRIPTOR, empty_pb2.DESCRIPTOR, otg_pb2.DESCRIPTOR):
        fds.file.add().ParseFromString(d.serialized_pb)
    return fds.SerializeToString(deterministic=True)


def main() -> None:
    data = descriptor_set()
    if "--check" in sys.argv:
        with open(OUT, "rb") as f:
            same = f.read() == data
        print("otg.fds matches snappi", SNAPPI if same else f"{SNAPPI}: DIFFERS. Fix: run scripts/otg_descriptor.py")
        sys.exit(0 if same else 1)
    tmp = OUT + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, OUT)
    print(f"wrote {OUT} ({len(data)} bytes) from snappi {SNAPPI}")


if __name__ == "__main__":
    main()
