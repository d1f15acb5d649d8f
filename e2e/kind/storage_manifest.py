"""Prints kind's default-storage manifest (a Go string constant in kind's node-image builder).

kind writes this manifest into every node image it builds; the offline node image needs the same
file, so it is read from the kind module the tools were built from, with its image constants filled in.

usage: python3 storage_manifest.py <kind module>/pkg/build/nodeimage/const_storage.go
"""

import re
import sys
from pathlib import Path


def main(path: str) -> None:
    source = Path(path).read_text(encoding="utf-8")
    constants = dict(re.findall(r'^const (\w+) = "([^"]*)"$', source, flags=re.MULTILINE))
    # The constant is backquoted text with ` + name + ` splices of other constants: fill those in first.
    source = re.sub(r"` \+ (\w+) \+ `", lambda m: constants[m.group(1)], source)
    match = re.search(r"^const defaultStorageManifest = `(.*?)`$", source, flags=re.MULTILINE | re.DOTALL)
    if match is None:
        sys.exit(f"no defaultStorageManifest in {path}")
    sys.stdout.write(match.group(1).lstrip("\n"))


if __name__ == "__main__":
    main(sys.argv[1])
