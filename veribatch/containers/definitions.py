"""The Apptainer definition files shipped in `containers/`, read without the apptainer binary.

Each ``<name>.def`` pins one verifier image and says so in machine-readable labels:

    org.veribatch.tool            registry name of the verifier (uautomizer, dafny, judge)
    org.veribatch.tool.version    the version the image installs
    org.veribatch.tool.url        the release it downloads (when it downloads one)
    org.veribatch.tool.sha256     that download's checksum, or UNPINNED
    org.veribatch.base            the base image; org.veribatch.base.digest its digest or UNPINNED

``%post`` repeats the URL and checksum as ``TOOL_URL=``/``TOOL_SHA256=`` (the build
checks the download against them), and ``%test`` runs the tool on a tiny input.
`problems()` reports what is not pinned or inconsistent, so `launch images check`
can say exactly what a user must fix before trusting an image.  Labels, ``From``
and ``%post`` are read with spython's parser; ``%test`` is read directly (spython
turns it into a script reference when converting).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from spython.main.parse.parsers import SingularityParser

DEFINITIONS_DIR = Path(__file__).resolve().parent
UNPINNED = "UNPINNED"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_DIGEST_REF = re.compile(r"@sha256:[0-9a-f]{64}$")
_SECTION = re.compile(r"^%(\w+)")


@dataclass(frozen=True)
class ImageDefinition:
    name: str
    path: Path
    base: str
    labels: dict[str, str]
    post: list[str]
    test: str
    files: list[str] = field(default_factory=list)

    @property
    def tool(self) -> str:
        return self.labels.get("org.veribatch.tool", self.name)

    @property
    def tool_version(self) -> str:
        return self.labels.get("org.veribatch.tool.version", "")

    def post_var(self, name: str) -> str | None:
        for line in self.post:
            m = re.match(rf"^\s*{name}=(\S+)\s*$", line)
            if m:
                return m.group(1)
        return None

    def unpinned(self) -> list[str]:
        """What this image does not pin yet (each item says what to pin)."""
        out: list[str] = []
        digest = self.labels.get("org.veribatch.base.digest", UNPINNED)
        if not _DIGEST_REF.search(self.base) and not _SHA256.match(digest.removeprefix("sha256:")):
            out.append(f"base image {self.base!r} has no sha256 digest "
                       "(set From: NAME@sha256:... and org.veribatch.base.digest)")
        url = self.labels.get("org.veribatch.tool.url")
        if url is not None and not _SHA256.match(self.labels.get("org.veribatch.tool.sha256", "")):
            out.append(f"download {url} has no sha256 (org.veribatch.tool.sha256 / TOOL_SHA256)")
        for pkg in self.unversioned_packages():
            out.append(f"apt package {pkg!r} has no pinned version")
        return out

    def unversioned_packages(self) -> list[str]:
        """Packages of ``apt-get install`` lines given without ``=VERSION``."""
        logical: list[str] = []
        pending = ""
        for line in self.post:
            stripped = line.strip()
            if stripped.endswith("\\"):
                pending += stripped[:-1] + " "
                continue
            logical.append(pending + stripped)
            pending = ""
        pkgs: list[str] = []
        for line in logical:
            m = re.match(r"^apt-get install\s+(.*)$", line)
            if m:
                pkgs += [w for w in m.group(1).split() if not w.startswith("-") and "=" not in w]
        return pkgs

    def problems(self) -> list[str]:
        """Inconsistencies that make the definition wrong, not merely unpinned."""
        out: list[str] = []
        for key in ("org.veribatch.tool", "org.veribatch.tool.version", "org.veribatch.base"):
            if not self.labels.get(key):
                out.append(f"label {key} missing")
        if not self.test.strip():
            out.append("%test section missing or empty")
        url = self.labels.get("org.veribatch.tool.url")
        if url is not None:
            if self.post_var("TOOL_URL") != url:
                out.append(f"%post TOOL_URL={self.post_var('TOOL_URL')} differs from label {url}")
            if self.post_var("TOOL_SHA256") != self.labels.get("org.veribatch.tool.sha256"):
                out.append("%post TOOL_SHA256 differs from label org.veribatch.tool.sha256")
        return out


def _sections(text: str) -> dict[str, str]:
    sections: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        m = _SECTION.match(line)
        if m:
            current = m.group(1)
            sections.setdefault(current, [])
        elif current is not None:
            sections[current].append(line)
    return {k: "\n".join(v) for k, v in sections.items()}


def parse_definition(path: Path) -> ImageDefinition:
    """Read one definition file (raises ValueError naming the file when it is malformed)."""
    path = Path(path)
    try:
        recipe = SingularityParser(str(path)).recipe
    except Exception as e:  # spython raises bare SystemExit/Exceptions on bad input
        raise ValueError(f"{path}: cannot parse definition file: {e}") from None
    if len(recipe) != 1:
        raise ValueError(f"{path}: expected one stage, found {len(recipe)}")
    stage = next(iter(recipe.values()))
    labels: dict[str, str] = {}
    for line in stage.labels:
        key, _, value = line.strip().partition(" ")
        labels[key] = value.strip()
    return ImageDefinition(
        name=path.stem,
        path=path,
        base=stage.fromHeader or "",
        labels=labels,
        post=list(stage.install),
        test=_sections(path.read_text()).get("test", ""),
        files=list(stage.files),
    )


def load_definitions(directory: Path = DEFINITIONS_DIR) -> dict[str, ImageDefinition]:
    """Every ``*.def`` in `directory`, by name."""
    return {p.stem: parse_definition(p) for p in sorted(Path(directory).glob("*.def"))}
