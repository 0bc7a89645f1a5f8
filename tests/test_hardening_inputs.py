"""Damaged input files (gains, scenarios) get one line naming the file."""

from __future__ import annotations

import pytest

from scidmz.policies.rate.mlc import Gains


@pytest.mark.parametrize("blob", [b"\x00\x01\x02\x03", b"\xff\xfe{", bytes(range(256))])
def test_binary_gains_file_names_the_file(tmp_path, blob):
    p = tmp_path / "gains.json"
    p.write_bytes(blob)
    with pytest.raises(ValueError) as ei:
        Gains.load(p)
    msg = str(ei.value)
    assert str(p) in msg and "\n" not in msg and "codec" not in msg, msg


def test_gains_path_that_is_a_fifo_is_refused_without_blocking(tmp_path):
    import os

    p = tmp_path / "gains.json"
    os.mkfifo(p)
    with pytest.raises(ValueError, match="FIFO"):
        Gains.load(p)
