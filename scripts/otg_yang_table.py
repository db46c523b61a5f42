"""Writes the OTG YANG models' state trees as a table, the schema the gNMI server answers from
(issue 59): one line per node, `kind<TAB>path<TAB>type<TAB>base<TAB>keys or enums`.

    python scripts/otg_yang_table.py MODELS_DIR > crates/gapless-gnmi/src/schema.tsv

MODELS_DIR is open-traffic-generator/models-yang's `models/` at the pinned commit (the
table's first line names it). Needs pyang (PyPI), which parses and validates the modules; the
table is committed, so building gapless does not.

- kind: container, list, leaf, leaf-list.
- path: the data nodes from the root, `/`-separated, without module prefixes.
- type: a leaf's type as the module names it (a typedef's name, e.g. `counter64`,
  `ieeefloat32`, or a built-in); base: the built-in it resolves to (`uint64`, `binary`, ...).
- keys (a list: space-separated, empty for a keyless list) or enums (an enumeration leaf:
  its values, comma-separated, as the YANG spells them).
"""

from __future__ import annotations

import sys
from pathlib import Path

from pyang import context, repository  # type: ignore[import-untyped]

COMMIT = "d7eff1df227cb0825743b2e93d2a529be65dd081"
KINDS = ("container", "list", "leaf", "leaf-list")


def base_of(t):  # type: ignore[no-untyped-def]
    """The built-in a type resolves to, and the enumeration's values if it is one."""
    while getattr(t, "i_typedef", None) is not None:
        t = t.i_typedef.search_one("type")
    enums = [e.arg for e in t.search("enum")]
    return t.arg.split(":")[-1], enums


def walk(node, path: str, out: list) -> None:  # type: ignore[no-untyped-def]
    for c in getattr(node, "i_children", []):
        if c.keyword in ("choice", "case"):
            walk(c, path, out)
            continue
        if c.keyword not in KINDS:
            continue
        p = f"{path}/{c.arg}"
        if c.keyword == "list":
            key = c.search_one("key")
            out.append(("list", p, "", "", key.arg if key else ""))
        elif c.keyword == "container":
            out.append(("container", p, "", "", ""))
        else:
            t = c.search_one("type")
            base, enums = base_of(t)
            out.append((c.keyword, p, t.arg.split(":")[-1], base, ",".join(enums)))
        walk(c, p, out)


def main() -> None:
    root = Path(sys.argv[1])
    repo = repository.FileRepository(str(root), use_env=False)
    ctx = context.Context(repo)
    mods = []
    for f in sorted(root.rglob("*.yang")):
        m = ctx.add_module(str(f), f.read_text())
        if m is not None and m.keyword == "module":
            mods.append(m)
    ctx.validate()
    errors = [e for e in ctx.errors if e[1] not in ("UNUSED_IMPORT",) and not e[1].startswith("LINT")]
    if errors:
        sys.exit(f"pyang: {len(errors)} errors, the first {errors[0][0].ref}:{errors[0][0].line} {errors[0][1]}")
    out: list = []
    for m in mods:
        walk(m, "", out)
    print(f"# open-traffic-generator/models-yang {COMMIT}: its state trees, by scripts/otg_yang_table.py")
    for row in out:
        print("\t".join(row))


if __name__ == "__main__":
    main()
