"""fileio: only regular files or new paths are written, atomically; inputs fail with one line naming the file."""

from __future__ import annotations

import os
import subprocess
import zipfile

import numpy as np
import pytest

from scidmz import fileio
from scidmz.fileio import (
    DestinationError,
    atomic_path,
    atomic_write_text,
    check_model_destination,
    check_output_dir,
    check_output_file,
    load_npz,
    read_text_input,
    replace_dir,
)


@pytest.fixture(autouse=True)
def _strict_parents():
    fileio.set_make_parents(False)
    yield
    fileio.set_make_parents(False)


def _one_line(exc: BaseException) -> str:
    msg = str(exc)
    assert "\n" not in msg and msg
    return msg


def test_new_and_regular_destinations_are_written(tmp_path):
    p = tmp_path / "a.txt"
    atomic_write_text(p, "one")
    atomic_write_text(p, "two")
    assert p.read_text() == "two"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["a.txt"]


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")
def test_device_node_is_refused_and_left_intact(tmp_path):
    node = tmp_path / "fakenull"
    os.mknod(node, 0o666 | 0o020000, os.makedev(1, 3))
    with pytest.raises(DestinationError) as ei:
        atomic_write_text(node, "x")
    assert "character device" in _one_line(ei.value)
    assert node.is_char_device()
    assert sorted(x.name for x in tmp_path.iterdir()) == ["fakenull"]  # no temp file left


def test_fifo_socket_and_directory_are_refused(tmp_path):
    import socket

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    sock_path = tmp_path / "sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(sock_path))
    d = tmp_path / "dir"
    d.mkdir()
    try:
        for path, kind in ((fifo, "FIFO"), (sock_path, "socket"), (d, "directory")):
            with pytest.raises(DestinationError, match=kind):
                check_output_file(path, "--out")
            with pytest.raises(DestinationError, match=kind):
                atomic_write_text(path, "x")
    finally:
        s.close()
    assert fifo.is_fifo() and d.is_dir() and list(d.iterdir()) == []


def test_symlinks_are_replaced_as_links_never_written_through(tmp_path):
    target = tmp_path / "target.txt"
    target.write_text("precious")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    atomic_write_text(link, "new")
    assert target.read_text() == "precious"  # the link's target is never written
    assert not link.is_symlink() and link.read_text() == "new"
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    atomic_write_text(dangling, "x")
    assert dangling.read_text() == "x" and not (tmp_path / "nowhere").exists()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    to_fifo = tmp_path / "to_fifo"
    to_fifo.symlink_to(fifo)
    with pytest.raises(DestinationError, match="symlink to a FIFO"):
        atomic_write_text(to_fifo, "x")
    assert to_fifo.is_symlink()


def test_missing_parents_are_an_error_unless_asked(tmp_path):
    p = tmp_path / "no" / "such" / "out.txt"
    with pytest.raises(DestinationError, match="does not exist.*--mkdir"):
        atomic_write_text(p, "x")
    assert not (tmp_path / "no").exists()
    atomic_write_text(p, "x", parents=True)
    assert p.read_text() == "x"
    q = tmp_path / "other" / "out.txt"
    fileio.set_make_parents(True)
    atomic_write_text(q, "y")
    assert q.read_text() == "y"


def test_a_file_used_as_a_folder_is_refused(tmp_path):
    f = tmp_path / "file"
    f.write_text("")
    with pytest.raises(DestinationError, match="Not a directory|not a directory"):
        check_output_file(f / "x.txt", "--out")
    with pytest.raises(DestinationError, match="not a directory"):
        check_output_dir(f, "--out")


def test_too_long_and_empty_names_are_refused(tmp_path):
    with pytest.raises(DestinationError):
        check_output_file(tmp_path / ("a" * 250), "--out")
    with pytest.raises(DestinationError):
        check_output_file("", "--out")


def test_error_in_the_writer_leaves_nothing_behind(tmp_path):
    p = tmp_path / "r.txt"
    p.write_text("old")
    with pytest.raises(RuntimeError), atomic_path(p) as tmp:
        tmp.write_text("half")
        raise RuntimeError("boom")
    assert p.read_text() == "old"
    assert [x.name for x in tmp_path.iterdir()] == ["r.txt"]


def _ro_mount_available() -> bool:
    return os.geteuid() == 0 and subprocess.run(["unshare", "--help"], capture_output=True).returncode == 0


@pytest.mark.skipif(not _ro_mount_available(), reason="needs root and unshare for a private read-only mount")
def test_read_only_file_system_is_refused_up_front(tmp_path):
    # A private mount namespace: the read-only bind mount is invisible to everything else.
    d = tmp_path / "ro"
    d.mkdir()
    (d / "old.txt").write_text("old")
    code = (
        "import sys; from scidmz.fileio import atomic_write_text, check_output_file, DestinationError\n"
        "try:\n"
        f"    check_output_file({str(d / 'old.txt')!r}, '--out')\n"
        "except DestinationError as e:\n"
        "    print(e)\n"
        "    sys.exit(3)\n"
    )
    r = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c",
         f"mount --bind -o ro {d} {d} && exec python3 -c \"$0\"", code],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(fileio.Path(fileio.__file__).parents[1]),
                                                                          os.environ.get("PYTHONPATH")]))},
    )
    assert r.returncode == 3, r.stderr
    assert "read-only file system" in r.stdout and r.stdout.count("\n") == 1
    assert (d / "old.txt").read_text() == "old"


# -- model directories -----------------------------------------------------------------


def _model_dir(path, tag):
    path.mkdir()
    (path / "meta.json").write_text('{"n_features": 22}')
    (path / "weights.npz").write_text(tag)
    return path


def _fresh(tmp_path, tag):
    t = tmp_path / f".build-{tag}"
    t.mkdir()
    (t / "meta.json").write_text('{"n_features": 22}')
    (t / "weights.npz").write_text(tag)
    return t


def test_replace_dir_leaves_nothing_behind(tmp_path):
    final = _model_dir(tmp_path / "model1", "v1")
    replace_dir(_fresh(tmp_path, "v2"), final)
    assert (final / "weights.npz").read_text() == "v2"
    assert [x.name for x in tmp_path.iterdir()] == ["model1"]
    new = tmp_path / "model2"
    replace_dir(_fresh(tmp_path, "v3"), new)
    assert (new / "weights.npz").read_text() == "v3"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["model1", "model2"]


def test_model_destination_inside_a_model_or_over_a_foreign_directory_is_refused(tmp_path):
    m = _model_dir(tmp_path / "model1", "v1")
    with pytest.raises(DestinationError, match="inside the model directory"):
        check_model_destination(m / "weights.npz")
    with pytest.raises(DestinationError, match="inside the model directory"):
        check_model_destination(m / "sub" / "deeper")
    home = tmp_path / "home"
    home.mkdir()
    (home / "thesis.tex").write_text("years of work")
    with pytest.raises(DestinationError, match="not a model directory"):
        check_model_destination(home)
    assert check_model_destination(m) == m  # replacing a model is fine
    empty = tmp_path / "empty"
    empty.mkdir()
    assert check_model_destination(empty) == empty
    with pytest.raises(DestinationError, match="does not exist"):
        check_model_destination(tmp_path / "a" / "b")
    assert (m / "weights.npz").read_text() == "v1"


def test_replace_dir_refuses_a_file(tmp_path):
    f = tmp_path / "f"
    f.write_text("x")
    with pytest.raises(DestinationError):
        replace_dir(_fresh(tmp_path, "v"), f)
    assert f.read_text() == "x"


# -- inputs --------------------------------------------------------------------------


def test_load_npz_names_the_file_for_truncated_random_and_pickled(tmp_path):
    good = tmp_path / "w.npz"
    np.savez(good, a=np.arange(1000.0), b=np.ones((30, 30)))
    assert load_npz(good)["a"].shape == (1000,)
    data = good.read_bytes()
    cases = {
        "truncated.npz": data[: len(data) // 2],
        "head.npz": data[:40],
        "random.npz": np.random.default_rng(0).bytes(4096),
        "empty.npz": b"",
        "text.npz": b"hello\n",
    }
    for name, blob in cases.items():
        p = tmp_path / name
        p.write_bytes(blob)
        with pytest.raises(ValueError) as ei:
            load_npz(p)
        msg = _one_line(ei.value)
        assert str(p) in msg and "pickled" not in msg, msg
    npy = tmp_path / "single.npy"
    np.save(npy, np.arange(3))
    with pytest.raises(ValueError, match="not an .npz"):
        load_npz(npy)
    with pytest.raises(ValueError, match="directory"):
        load_npz(tmp_path)
    with pytest.raises(FileNotFoundError, match="not found"):
        load_npz(tmp_path / "missing.npz")
    # A zip with a corrupt member: the error surfaces when the array is read.
    bad = tmp_path / "badmember.npz"
    with zipfile.ZipFile(bad, "w") as z:
        z.writestr("a.npy", b"\x93NUMPY garbage")
    with pytest.raises(ValueError, match="badmember.npz"):
        load_npz(bad)


def test_read_text_input_names_the_file(tmp_path):
    ok = tmp_path / "g.json"
    ok.write_text('{"kp": 1}')
    assert read_text_input(ok, "gains file") == '{"kp": 1}'
    for name, blob in {"bin.json": b"\x00\x01\x02\xff", "latin.json": b"\xe9t\xe9"}.items():
        p = tmp_path / name
        p.write_bytes(blob)
        with pytest.raises(ValueError) as ei:
            read_text_input(p, "gains file")
        assert str(p) in _one_line(ei.value)
    with pytest.raises(ValueError, match="directory"):
        read_text_input(tmp_path, "gains file")
