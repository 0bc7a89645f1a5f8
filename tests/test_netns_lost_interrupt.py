"""A Ctrl-C whose exception Python loses still ends a netns episode.

The testbed's handler tears the testbed down and raises KeyboardInterrupt wherever the main thread
is. Raised inside a finalizer (``__del__``), Python prints "Exception ignored" and goes on; on
2026-12-07 the episode then ran 35 s more on the torn-down testbed and was recorded as a unit. The
plant now raises the signal again at its next period. Root, real testbed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from scidmz.scenario import load_scenario

pytestmark = pytest.mark.root


class _SignalInFinalizer:
    """Sends SIGINT to this process from its finalizer, so the handler's exception is lost there."""

    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(10_000):  # the handler runs between these bytecodes, inside the finalizer
            pass


def _namespaces(prefix: str) -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return [ln.split()[0] for ln in out.splitlines() if ln.startswith(prefix)]


def test_a_lost_interrupt_ends_the_episode_at_the_next_period(monkeypatch: pytest.MonkeyPatch) -> None:
    from scidmz.plant.netns.plant import NetnsPlant

    lost: list[type] = []  # what Python would print as "Exception ignored in ..."
    monkeypatch.setattr(sys, "unraisablehook", lambda u: lost.append(u.exc_type))

    sc = load_scenario("testbed").replace(campus={"hosts": 1, "short_flow_senders": 0}, duration=10.0)
    prefix = f"tli{os.getpid() % 1000:03d}"
    plant = NetnsPlant(sc, prefix=prefix)
    try:
        plant.reset(0)
        plant.step(sc.capacity / 2)
        obj = _SignalInFinalizer()
        del obj  # the testbed goes down here, and the KeyboardInterrupt is printed and dropped
        assert lost == [KeyboardInterrupt]
        assert plant.testbed.record is None and not _namespaces(prefix)
        with pytest.raises(KeyboardInterrupt):
            plant.step(sc.capacity / 2)
    finally:
        plant.close()
    assert not _namespaces(prefix)
