"""docs/architecture.md names only modules that exist.

Every path the page names -- in backticks (``plant/netns/spec.py``, ``policies/rate/``), the top-level
modules of the layers diagram, and a room's listed modules (``twin/ (parse.py, ...)``) -- must
exist under src/scidmz, src/ or the repository root. Only the v4 parts the page says are still
being built may be missing (``PLANNED``).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "src" / "scidmz"
PAGE = ROOT / "docs" / "architecture.md"
#: Named by the page as v4 design that is being built (its text says so); may be missing meanwhile.
PLANNED = {"agent/"}
_NAME = r"[A-Za-z_][\w.-]*"
_PATH = re.compile(rf"^(?:{_NAME}/)*{_NAME}(?:\.(?:py|c|md|toml|j2|sh)|/)$")


def _exists(name: str, bases: tuple[Path, ...]) -> bool:
    rel = name.rstrip("/")
    if any((b / rel).exists() for b in bases):
        return True
    # a bare name ("tbf.py", "p4/") named in its package's sentence
    return "/" not in rel and any(PKG.rglob(rel))


def _named_in_backticks(text: str) -> set[str]:
    return {t for t in re.findall(r"`([^`\s]+)`", text) if _PATH.match(t) and ("/" in t or t.endswith(".py"))}


def _layers_block(text: str) -> str:
    return "cli.py" + text.split("```\ncli.py", 1)[1].split("```", 1)[0]


def _diagram_top_names(block: str) -> set[str]:
    """The first column of the layers diagram: the top-level modules and packages."""
    names: set[str] = set()
    for line in block.splitlines():
        head = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0] if not line.startswith(" ") else ""
        names |= {t for t in head.split() if _PATH.match(t)}
    return names


def _diagram_room_members(block: str) -> set[tuple[str, str]]:
    """``room/ (a.py, b.py, ...)`` in the diagram -> (room, member) pairs."""
    flat = " ".join(block.split())
    pairs = set()
    for room, inside in re.findall(r"(\w+)/ \(([^)]*)\)", flat):
        for member in re.findall(r"\b(\w+\.py)\b", inside):
            pairs.add((room, member))
    return pairs


def test_every_module_path_the_page_names_exists() -> None:
    text = PAGE.read_text()
    bases = (PKG, ROOT / "src", ROOT, ROOT / "docs")
    missing = sorted(n for n in _named_in_backticks(text) | _diagram_top_names(_layers_block(text))
                     if n not in PLANNED and not _exists(n, bases))
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


def test_every_room_member_of_the_layers_diagram_exists() -> None:
    pairs = _diagram_room_members(_layers_block(PAGE.read_text()))
    assert len(pairs) > 10  # the parser above found the rooms
    missing = sorted(f"{room}/{m}" for room, m in pairs
                     if not any(d.is_dir() and (d / m).exists() for d in PKG.rglob(room)))
    assert not missing, f"docs/architecture.md's layers diagram lists modules that do not exist: {missing}"


def test_the_diagram_parser_sees_the_top_level(tmp_path: Path) -> None:
    top = _diagram_top_names(_layers_block(PAGE.read_text()))
    assert {"cli.py", "commands/", "guard/", "controller/", "datasets/", "strictjson.py"} <= top
    assert not _exists("nosuch/module.py", (PKG,))
