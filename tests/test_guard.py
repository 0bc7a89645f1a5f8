"""scidmz.guard.exitcodes: which exceptions are the user's bad input (exit 2) and which are ours (exit 1)."""

from __future__ import annotations

import pytest

from scidmz.errors import BadInput
from scidmz.guard.exitcodes import guarded


def _raising(exc: BaseException):
    def run() -> int:
        raise exc

    return run


@pytest.mark.parametrize("exc", [BadInput("--trials 0: below 1"), ValueError("--rate 'x': not a rate"),
                                 FileNotFoundError("no such file: a.toml"), PermissionError("b.json: denied")])
def test_bad_input_is_exit_2_and_one_line(exc: BaseException, capsys: pytest.CaptureFixture[str]) -> None:
    assert guarded(_raising(exc)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("scidmz: error: ") and "internal" not in err


@pytest.mark.parametrize("exc", [TypeError("unsupported operand"), OverflowError("cannot convert float infinity"),
                                 KeyError("x"), AssertionError("never")])
def test_a_builtin_type_or_overflow_error_is_an_internal_error(exc: BaseException,
                                                             capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SCIDMZ_DEBUG", raising=False)
    assert guarded(_raising(exc)) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"scidmz: internal error: {type(exc).__name__}: ")


def test_debug_shows_the_internal_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCIDMZ_DEBUG", "1")
    with pytest.raises(TypeError):
        guarded(_raising(TypeError("bug")))


@pytest.mark.parametrize(("exc", "code"), [(RuntimeError("iperf3 died"), 1), (OSError("EBUSY"), 1),
                                           (MemoryError(), 1), (KeyboardInterrupt(), 130)])
def test_runtime_failures(exc: BaseException, code: int, capsys: pytest.CaptureFixture[str]) -> None:
    assert guarded(_raising(exc)) == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal" not in err


def test_a_missing_optional_module_names_its_extra(capsys: pytest.CaptureFixture[str]) -> None:
    assert guarded(_raising(ModuleNotFoundError("No module named 'kmeans1d'", name="kmeans1d"))) == 1
    assert "pip install 'scidmz[baselines]'" in capsys.readouterr().err


def test_bad_input_is_a_value_error() -> None:
    assert issubclass(BadInput, ValueError)
