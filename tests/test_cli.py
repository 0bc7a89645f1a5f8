"""The command line: help is import-light, bad input gets one line, --json ends with JSON."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from scidmz.cli import main

HEAVY = ("tensorflow", "keras", "pygad", "mlflow", "pyroute2", "numba", "sklearn", "grpc", "scapy", "matplotlib",
         "numpy", "pandas", "pydantic")


def test_help_imports_nothing_heavy():
    code = (
        "import sys, contextlib, io\n"
        "import scidmz.cli\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try: scidmz.cli.main(['--help'])\n"
        "    except SystemExit: pass\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_scenarios_json(capsys):
    assert main(["scenarios", "--json"]) == 0
    data = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert "paper-cubic" in data["scenarios"]


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["simulate", "paper-cubic", "--target", "2G"], "above the bottleneck capacity"),
        (["simulate", "paper-cubic", "--target", "lots"], "--target"),
        (["simulate", "nope-scenario"], "unknown scenario"),
        (["simulate", "paper-cubic", "--set", "dtn.cca=vegas"], "dtn.cca"),
        (["simulate", "paper-cubic", "--policy", "pid"], "unknown policy"),
        (["simulate", "paper-cubic", "--plant", "cloud"], "unknown plant"),
        (["simulate", "small-cubic", "--policy", "mlc"], "needs --model"),
    ],
)
def test_bad_input_one_line(argv, needle, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("scidmz: error:") and needle in err and "\n" not in err


def test_exit_codes_bad_input_2_runtime_1_missing_extra_named(monkeypatch, capsys):
    import scidmz.cli as cli

    def fail(exc):
        def run(args):
            raise exc
        return run

    for exc, code, text in [
        (ValueError("bad rate"), 2, "scidmz: error: bad rate"),
        (RuntimeError("tc failed"), 1, "scidmz: error: tc failed"),
        (ModuleNotFoundError("No module named 'pygad'", name="pygad"), 1, "install the 'ml' extra"),
    ]:
        parser = cli.build_parser()
        args = parser.parse_args(["scenarios"])
        monkeypatch.setattr(cli, "build_parser", lambda p=parser, a=args: type("P", (), {"parse_args": lambda self, argv: a, "print_help": lambda self: None})())
        args.func = fail(exc)
        assert cli.main(["scenarios"]) == code
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and text in err[0]
