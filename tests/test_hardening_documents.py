"""Every document is bounded before it is parsed (docs/safety.md, "Documents").

A generated family of TOML and JSON documents, each just past one bound (depth of arrays and inline
tables, parts of one dotted key, dots of all keys, number of keys, key length, size) and the same
shape just inside it, read through every reader (a scenario file, a --config file, a results
file, a ledger). Past the bound: one line naming the file, and the parser never runs. Inside it:
the pre-scan lets it through.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from scidmz import fileio
from scidmz.limits import MAX_DEPTH, MAX_KEY_CHARS, MAX_KEY_DOTS, MAX_KEYS

ROOT = Path(__file__).resolve().parents[1]


def _dotted(n: int) -> str:
    return ".".join(f"k{i}" for i in range(n)) + " = 1\n"


def _toml_family(over: bool) -> dict[str, str]:
    """One document per bound: just past it (``over``) or at it."""
    d = MAX_DEPTH + (1 if over else -1)
    per_key = MAX_DEPTH - 1  # dots of one key at the depth bound
    n_keys = (MAX_KEY_DOTS + (1 if over else 0) + per_key - 1) // per_key
    long_dots = "".join(f"t{j}." + ".".join(f"k{i}" for i in range(per_key)) + f" = {j}\n"
                        for j in range(n_keys))
    if not over:
        long_dots = "".join(line for line in long_dots.splitlines(keepends=True)[:-1])
    return {
        "dotted key parts": _dotted(MAX_DEPTH + (1 if over else 0)),
        "dots of all keys": long_dots,
        "array depth": "x = " + "[" * d + "1" + "]" * d + "\n",
        "inline table depth": "x = " + "{a = " * d + "1" + "}" * d + "\n",
        "dotted key in an inline table": "x = {" + _dotted(MAX_DEPTH + (1 if over else -1)).strip() + "}\n",
        "bare key length": "k" * (MAX_KEY_CHARS + (1 if over else 0)) + " = 1\n",
        "quoted key length": '"' + "k" * (MAX_KEY_CHARS + (1 if over else 0)) + '" = 1\n',
        "table header parts": "[" + ".".join(f"h{i}" for i in range(MAX_DEPTH + (1 if over else 0))) + "]\n",
        "keys": "".join(f"k{i} = 1\n" for i in range(MAX_KEYS + (1 if over else 0))),
    }


@pytest.fixture
def no_parser(monkeypatch):
    """Fail the test if tomllib or json parse anything: the bound must come first."""
    import json as _json
    import tomllib

    def boom(*_a, **_k):
        raise AssertionError("the parser ran before the bound was checked")

    monkeypatch.setattr(tomllib, "loads", boom)
    monkeypatch.setattr(_json, "loads", boom)


@pytest.mark.parametrize("name", list(_toml_family(True)))
def test_toml_past_a_bound_is_refused_before_tomllib(name, no_parser) -> None:
    with pytest.raises(ValueError) as exc:
        fileio.parse_toml(_toml_family(True)[name], "doc.toml")
    msg = str(exc.value)
    assert msg.startswith("doc.toml: ") and "\n" not in msg


@pytest.mark.parametrize("name", list(_toml_family(False)))
def test_toml_inside_every_bound_passes_the_prescan(name) -> None:
    fileio.prescan_toml(_toml_family(False)[name], "doc.toml")


def test_strings_and_comments_are_not_keys_or_brackets() -> None:
    text = ('a = "' + "[" * 100 + '"\n' + "b = '" + "{" * 100 + "'\n" + "# " + "a." * 100 + "= 1\n"
            + 'c = """\n' + "x.y.z = " * 50 + '\n"""\n' + 'd = "' + "k" * 5000 + '"\n')
    fileio.prescan_toml(text, "doc.toml")
    import tomllib

    assert tomllib.loads(text)["a"] == "[" * 100


def test_every_builtin_scenario_passes() -> None:
    for f in (resources.files("scidmz") / "scenarios").iterdir():
        if f.name.endswith(".toml"):
            fileio.parse_toml(f.read_text(), f.name)


def _run(*argv: str, limit_mb: int = 1500) -> subprocess.CompletedProcess:
    """The CLI in a process whose address space is capped: a parser that allocates first dies."""
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit_mb << 20, limit_mb << 20))

    return subprocess.run([sys.executable, "-m", "scidmz.cli", *argv], capture_output=True, text=True,
                          timeout=120, preexec_fn=cap, env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})


def test_the_probes_quadratic_dotted_keys_are_one_line_exit_2(tmp_path) -> None:
    """The probe: a 200 kB scenario of long dotted keys took tomllib 5.9 GB, a 60 kB --config 3.5 GB."""
    def lines(n: int) -> str:
        return "".join(f"l{i}." + ".".join(["a"] * 400) + " = 1\n" for i in range(n))

    scen = tmp_path / "dots.toml"
    scen.write_text(lines(250))  # ~200 kB
    r = _run("simulate", str(scen), "--duration", "1")
    assert r.returncode == 2, r.stderr[-500:]
    assert "dots.toml" in r.stderr and "dotted key" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    conf = tmp_path / "c.toml"
    conf.write_text(lines(75))  # ~60 kB
    r = _run("control", "run", "small-cubic", "--target", "5M", "--config", str(conf))
    assert r.returncode == 2, r.stderr[-500:]
    assert "c.toml" in r.stderr and len(r.stderr.strip().splitlines()) == 1


# -- JSON ---------------------------------------------------------------------------------------

def _json_family(over: bool) -> dict[str, str]:
    d = MAX_DEPTH + (1 if over else 0)
    return {
        "array depth": "[" * d + "]" * d,
        "object depth": '{"a": ' * d + "1" + "}" * d,
        "key length": json.dumps({"k" * (MAX_KEY_CHARS + (1 if over else 0)): 1}),
        "deep, very deep": "[" * (100_000 if over else MAX_DEPTH) + "]" * (100_000 if over else MAX_DEPTH),
    }


@pytest.mark.parametrize("name", list(_json_family(True)))
def test_json_past_a_bound_is_refused_before_json_loads(name, no_parser, tmp_path) -> None:
    with pytest.raises(ValueError) as exc:
        fileio.parse_json(_json_family(True)[name], "doc.json")
    assert str(exc.value).startswith("doc.json: ")


@pytest.mark.parametrize("name", list(_json_family(True)))
def test_json_past_a_bound_in_a_results_file_or_a_ledger_is_one_line(name, tmp_path) -> None:
    from scidmz.evaluation.leaderboard.ledger import parse_ledger
    from scidmz.evaluation.results import read_results

    doc = _json_family(True)[name]
    p = tmp_path / "results.json"
    p.write_text(doc)
    with pytest.raises(ValueError, match="results.json") as exc:
        read_results(p)
    assert "\n" not in str(exc.value)
    head = json.dumps({"kind": "header"}).encode()
    with pytest.raises(ValueError, match="line 2") as exc:
        parse_ledger(head + b"\n" + doc.encode() + b"\n", "ledger")
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("name", list(_json_family(False)))
def test_json_inside_every_bound_parses(name) -> None:
    fileio.parse_json(_json_family(False)[name], "doc.json")


def test_brackets_in_json_strings_are_not_nesting() -> None:
    doc = {"a": "[" * 1000 + '\\"{' * 100, "b": ["]" * 50]}
    assert fileio.parse_json(json.dumps(doc), "doc.json") == doc
