"""The shared BMv2 replay (disciplines/p4check.py) loses no frame when the switch's egress is slow."""

import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from scidmz.disciplines import p4check
from scidmz.disciplines.abc.p4check import compile_abc, run_bmv2

pytestmark = pytest.mark.skipif(not p4check.available(), reason="P4 toolchain not unpacked (scripts/install_p4tc.sh)")


def _slow_egress(deepen: bool, pps: int):
    """A stand-in for ``_deepen_egress`` that throttles the switch's egress to ``pps`` through the
    same Thrift service, after deepening its queues (or not): a switch that falls behind for sure."""
    real = p4check._deepen_egress

    def slow(port: int, depth: int, deadline: float) -> bool:
        ok = real(port, depth if deepen else 64, deadline)
        with p4check.sswitch_client(port) as client:
            client.set_all_egress_queue_rates(pps)
        return ok and time.monotonic() < deadline  # throttled before the first frame, else retried

    return slow


@pytest.mark.parametrize("deepen", [True, False])
def test_a_replay_through_a_slow_egress_returns_every_frame(monkeypatch, deepen: bool) -> None:
    """1000 frames 100 us apart (10 kpps) into an egress throttled to 3 kpps: BMv2's default
    64-packet egress queue drops (the CI flake), the deepened one does not."""
    n = 1000
    monkeypatch.setattr(p4check, "_deepen_egress", _slow_egress(deepen, 3000))
    with tempfile.TemporaryDirectory() as d:
        w = Path(d)
        args = (compile_abc(w), np.arange(n) * 100, np.zeros(n, int), np.full(n, 1500), np.zeros(n, int), w)
        if deepen:
            act, _ = run_bmv2(*args)
            assert act.size == n
        else:
            with pytest.raises(RuntimeError, match=f"BMv2 returned [0-9]+ of {n} packets"):
                run_bmv2(*args)
