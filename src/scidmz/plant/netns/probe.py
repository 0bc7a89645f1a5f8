"""The idle-path RTT probe of a built testbed (``measure_rtt``).

It times a TCP connect from a sender's namespace to a closed port on its
receiver: the SYN goes out, the RST comes back through the delay stage, so
the connect fails after exactly one round trip, measured by the kernel's own
packets. ``Testbed.calibrate_delay`` and ``check`` both use it.
"""

from __future__ import annotations

import socket
import statistics
import time
from typing import Any

__all__ = ["measure_rtt"]

_CLOSED_PORT = 9  # discard: nothing listens on it in a receiver namespace


def _socket_in(ns: str) -> socket.socket:
    from pyroute2 import netns

    netns.pushns(ns)
    try:
        return socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    finally:
        netns.popns()


def measure_rtt(tb: Any, sender: str, probes: int = 15, gap: float = 0.02) -> dict[str, float]:
    """Idle-path RTT of ``sender`` -> its receiver, from TCP SYN/RST exchanges (s).

    ``tb``: a built ``Testbed`` (only its ``hosts`` are read; typed loosely so this
    module sits below ``testbed``, which calibrates its delay stage with it).
    """
    h = tb.hosts[sender]
    dst = tb.hosts[h.peer].ip
    samples = []
    for i in range(probes + 1):
        s = _socket_in(h.ns)
        s.settimeout(5.0)
        t0 = time.perf_counter()
        try:
            s.connect((dst, _CLOSED_PORT))
        except ConnectionRefusedError:
            pass
        except OSError as exc:
            raise RuntimeError(f"RTT probe {sender} -> {h.peer} failed: {exc}") from None
        finally:
            dt = time.perf_counter() - t0
            s.close()
        if i:  # the first probe also resolves ARP
            samples.append(dt)
        time.sleep(gap)
    med = statistics.median(samples)
    return {
        "configured": h.rtt,
        "median": med,
        "min": min(samples),
        "max": max(samples),
        "error": med - h.rtt,
    }
