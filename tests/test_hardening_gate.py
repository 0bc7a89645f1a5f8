"""The one input gate (docs/safety.md, "Input files"): every path a command line, a config file or a
plant option names is a regular file of bounded size, refused with one line naming it otherwise;
a name resolves only to what its kind allows (a built-in scenario, a network namespace)."""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path

import pytest

from scidmz import fileio


@pytest.fixture(autouse=True)
def _no_hang():
    def boom(*_):
        raise TimeoutError("blocked on a FIFO")

    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def _family(tmp: Path) -> dict[str, tuple[Path, str]]:
    """Paths that are not a regular file of bounded size, with what the refusal must say."""
    os.mkfifo(tmp / "fifo")
    (tmp / "dir").mkdir()
    (tmp / "big").write_bytes(b"x" * 2000)
    (tmp / "to-zero").symlink_to("/dev/zero")
    (tmp / "to-fifo").symlink_to(tmp / "fifo")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp / "sock"))
    return {
        "/dev/zero": (Path("/dev/zero"), "character device"),
        "a FIFO": (tmp / "fifo", "FIFO"),
        "a directory": (tmp / "dir", "directory"),
        "a socket": (tmp / "sock", "socket"),
        "a link to /dev/zero": (tmp / "to-zero", "character device"),
        "a link to a FIFO": (tmp / "to-fifo", "FIFO"),
        "too big": (tmp / "big", "too large"),
        "missing": (tmp / "none", "not found"),
    }


def _readers():
    from scidmz.telemetry.p4.p4info import P4InfoIndex

    return {
        "read_bytes_input": lambda p: fileio.read_bytes_input(p, "input", max_bytes=1000),
        "read_text_input": lambda p: fileio.read_text_input(p, "input", max_bytes=1000),
        "read_json_input": lambda p: fileio.read_json_input(p, "input", max_bytes=1000),
        "P4Info text": lambda p: P4InfoIndex.from_file(p),
    }


@pytest.mark.parametrize("reader", list(_readers()))
def test_every_reader_refuses_what_is_not_a_bounded_regular_file(tmp_path, reader) -> None:
    call = _readers()[reader]
    for case, (path, says) in _family(tmp_path).items():
        if reader == "P4Info text" and case == "too big":
            continue  # the P4Info's bound is the text bound (64 MiB)
        with pytest.raises((ValueError, FileNotFoundError)) as exc:
            call(path)
        msg = str(exc.value)
        assert "\n" not in msg and str(path) in msg, (case, msg)
        if reader != "P4Info text" or case != "missing":
            assert says in msg, (case, msg)


def test_a_regular_file_inside_the_bound_is_read(tmp_path) -> None:
    p = tmp_path / "ok.json"
    p.write_text('{"a": 1}')
    assert fileio.read_bytes_input(p, "input", 1000) == b'{"a": 1}'
    assert fileio.read_json_input(p, "input") == {"a": 1}


@pytest.mark.parametrize("p4info,netns,says", [
    ("/dev/zero", None, "plant option p4info /dev/zero: is a character device"),
    ("/nonexistent/p4info.txtpb", None, "p4info not found"),
    (None, "/proc/1/ns/net", "not a path"),
    (None, "../netns", "not a path"),
    (None, "a/b", "not a path"),
    (None, ".", "not a path"),
    (None, "", "not a path"),
    (None, "x" * 256, "not a path"),
])
def test_the_hardware_plants_files_and_names_are_gated_before_anything_opens(p4info, netns, says) -> None:
    from scidmz.plant.hardware import build_hardware_plant
    from scidmz.scenario import load_scenario

    def actuator(*_a, **_k):
        raise AssertionError("the actuator was built before the options were checked")

    with pytest.raises((ValueError, FileNotFoundError), match=says):
        build_hardware_plant(load_scenario("testbed"), dev="lo", telemetry="127.0.0.1:9", p4info=p4info,
                             netns=netns, actuator=actuator)


@pytest.mark.parametrize("depth", range(1, 8))
def test_a_builtin_name_resolves_only_to_the_builtins(tmp_path, monkeypatch, depth) -> None:
    """The probe: a built-in scenario name reached files outside the built-ins (``../../x``)."""
    from importlib import resources

    from scidmz.scenario import load_scenario

    monkeypatch.chdir(tmp_path)
    pkg = Path(str(resources.files("scidmz") / "scenarios"))
    up = pkg
    for _ in range(depth):
        up = up.parent
    evil = up / "scidmz-hardening-evil.toml"
    name = "../" * depth + "scidmz-hardening-evil"
    try:
        evil.write_text('name = "evil"\n')
    except OSError:
        pytest.skip(f"cannot write in {up}")
    try:
        with pytest.raises(ValueError, match="unknown scenario"):
            load_scenario(name)
    finally:
        evil.unlink()
    for n in ("paper-cubic", "testbed", "small-cubic"):
        assert load_scenario(n).name
