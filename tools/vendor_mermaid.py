"""`make vendor-mermaid`: fetch the pinned mermaid from the npm registry, check it, put its bundle in public/vendor.

The tarball must match the sha512 pinned here and the one the registry's metadata states; only the minified
bundle and the licence are kept (the page loads nothing from another host).
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import tarfile
import urllib.request
from pathlib import Path

VERSION = "12.3.0"
INTEGRITY = "sha512-4113TdXeLAsMruJ79OpFL5O8+LTFXhQqZ260rF3tgUmiNAtRm4Uume04I+65PRN6yZ69J4f8rVYWW8zRk65UYw=="
METADATA = f"https://registry.npmjs.org/mermaid/{VERSION}"
TARGET = Path(__file__).resolve().parent.parent / "public" / "vendor" / "mermaid"
# Member of the tarball -> the file it becomes under TARGET.
KEPT = {"package/dist/mermaid.min.js": "mermaid.min.js", "package/LICENSE": "LICENSE"}


def fetched(url: str) -> bytes:
    """The body at url."""
    with urllib.request.urlopen(url, timeout=120) as reply:
        body: bytes = reply.read()
    return body


def integrity(data: bytes) -> str:
    """npm's integrity string for data (Subresource Integrity, sha512)."""
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def main() -> None:
    """Fetch, verify and unpack the pinned version; refuse anything that does not match the pin."""
    dist = json.loads(fetched(METADATA))["dist"]
    if dist["integrity"] != INTEGRITY:
        raise SystemExit(f"the registry states {dist['integrity']} for mermaid {VERSION}, the pin is {INTEGRITY}")
    tarball = fetched(dist["tarball"])
    if integrity(tarball) != INTEGRITY:
        raise SystemExit(f"{dist['tarball']} does not match its integrity {INTEGRITY}")
    TARGET.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as archive:
        for member, name in KEPT.items():
            source = archive.extractfile(member)
            if source is None:
                raise SystemExit(f"{member} is missing from mermaid {VERSION}")
            (TARGET / name).write_bytes(source.read())
    print(f"mermaid {VERSION} verified ({INTEGRITY[:23]}…) into {TARGET}")


if __name__ == "__main__":
    main()
