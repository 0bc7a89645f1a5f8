"""A clone is self-contained: no tracked file points at a tracker or a folder a clone cannot see.

A tracker number ("issue" and a number) means nothing to a reader of a clone; the code and docs state the reason itself. Results
under reports/ are records of past runs and keep what they said. Other projects' trackers are
cited by URL (``https://github.com/p4lang/PI/issues/376``), which a reader can follow.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# An issue number in any of its spellings (singular, plural, with "#"); and the design folder
# beside the repository ("specs", one level up).
PATTERN = re.compile(r"\b[Ii]ssues? #?[0-9]+|\.\.[/]specs\b")
KEPT = ("reports/",)


def _tracked() -> list[str]:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the tracked files are unknown")
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [p for p in out.decode().split("\0") if p and not p.startswith(KEPT)]


def offenders(paths: list[str]) -> list[str]:
    """``path:line: text`` of every line that cites a tracker issue or the specs folder."""
    found = []
    for rel in paths:
        path = ROOT / rel
        if not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue  # binary
        for n, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if PATTERN.search(line):
                found.append(f"{rel}:{n}: {line.strip()[:120]}")
    return found


def test_no_tracked_file_cites_a_tracker_issue_or_specs() -> None:
    found = offenders(_tracked())
    assert not found, f"{len(found)} lines cite an issue or the specs folder; state the reason instead:\n" + "\n".join(found)


def test_the_check_sees_each_form() -> None:
    # Spelt in pieces, so that this file does not match its own check.
    issue, specs = "iss" + "ue", ".." + "/specs"
    lines = [f"fixed in {issue} 29", f"I{issue[1:]}s 10 and 29 say", f"see {issue} #5", f"as {specs}/x.md says",
             "https://github.com/p4lang/PI/issues/376", "an issue with 3 parts", "tissue 4"]
    assert [bool(PATTERN.search(s)) for s in lines] == [True, True, True, True, False, False, False]
