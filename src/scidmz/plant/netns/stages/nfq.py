"""NFQUEUE data-path stage: a bottleneck discipline's numba core on real packets.

Where it sits: inside a router namespace, on the forwarded traffic towards the
bottleneck egress (``iptables -A FORWARD -o <egress> -j NFQUEUE --queue-num N``,
installed in that namespace only). Every queued packet gets one verdict from the
discipline's stage decider (``scidmz.disciplines.<name>.stage``), which calls
the same decision core the fluid plant uses, so the realisations cannot drift.
This module is the discipline-free part: packets, counters, the queue loop.

- Only the first ``COPY_RANGE`` bytes are copied to user space (the IPv4 header
  is all a decision needs); the packet length comes from the IP total-length
  field.
- Aggregates (ABC) and streams (FFS) are source IPv4 addresses; ``--ingress-of``
  maps sources to aggregates/ingresses (the deciders say how they use it).
- ``--weights-file``: re-read every second; a JSON list of per-aggregate
  weights in bit/s (ABC: the reference rates R_r; FFS: the matrix column,
  rescaled to the capacity) -- how the admin's target reaches a running stage.
- ABC's queue Q is a virtual FIFO drained at ``link_bps`` (see
  :func:`scidmz.disciplines.abc.core.abc_fifo_packet` for why).
- Time is the kernel's arrival stamp of each packet (``SO_TIMESTAMPNS`` held
  open so the kernel takes them), not the moment user space reads it.
- Malformed or non-IPv4 packets are accepted untouched and counted.
- ``pass`` mode accepts everything: it measures the stage's own cost.

Counters (received, accepted, dropped by the discipline, malformed, non-IP, CPU
seconds) and the kernel's own queue counters for this queue
(``/proc/net/netfilter/nfnetlink_queue``: ``queue_dropped`` = queue full,
``user_dropped`` = socket overrun; both must stay 0 -- those are *stage*
drops) are written as JSON to ``--stats`` every second and at exit.

Run: ``python -m scidmz.plant.netns.stages.nfq --queue 0 --discipline abc
--config '{"capacity_bps": 5e7}' --link-bps 5e7 --stats /tmp/x.json`` inside the
router namespace. SIGTERM/SIGINT end it cleanly.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import select
import signal
import socket
import sys
import time
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from scidmz.units import ETH_HLEN

COPY_RANGE = 64
# The stage sees IP packets; the qdisc behind it (tbf, htb) counts frames with their 14 B Ethernet
# header. Decisions use frame bytes, so ABC's virtual FIFO drains exactly as the real one does
# (in IP bytes it ran ~1 % ahead of a 50 Mbit/s tbf, and a CBR held at its threshold in the
# virtual queue overfilled the real one -- the TCP flow beside it lost to tail drops).
FRAME_OVERHEAD = ETH_HLEN
DEFAULT_MAXLEN = 16384
SOCK_BYTES = 8 << 20
SO_TIMESTAMPNS = 35
#: ``--discipline pass``: drop-tail's decider (accept all; the qdisc behind is the FIFO)
PASS_DISCIPLINE = "droptail"


class PacketLike(Protocol):
    def get_payload(self) -> bytes: ...
    def accept(self) -> None: ...
    def drop(self) -> None: ...


def parse_ipv4(b: bytes) -> tuple[int, int] | None | bool:
    """(source address as int, total length) of an IPv4 header; False if not IPv4, None if malformed."""
    if len(b) < 1 or b[0] >> 4 != 4:
        return False
    if len(b) < 20:
        return None
    ihl = (b[0] & 0x0F) * 4
    tot = (b[2] << 8) | b[3]
    if ihl < 20 or tot < ihl:
        return None
    return int.from_bytes(b[12:16], "big"), tot


class Stage:
    """One discipline's per-packet verdicts plus counters (usable without a queue, for tests).

    The verdicts are the discipline's own stage decider's
    (``scidmz.disciplines.<name>.stage.Decider``, found in the registry); ``pass``
    is drop-tail's, which accepts everything.
    """

    def __init__(self, discipline: str, config: dict[str, Any], link_bps: float, ingress_of: dict[str, int],
                 seed: int, max_sources: int = 64, clock: Callable[[], float] = time.time) -> None:
        from scidmz.disciplines import registry

        self.clock = clock
        self.t0 = clock()
        self.counts = {"received": 0, "accepted": 0, "dropped": 0, "malformed": 0, "non_ip": 0, "unstamped": 0}
        sources = {int.from_bytes(socket.inet_aton(k), "big"): int(v) for k, v in ingress_of.items()}
        entry = registry.get(PASS_DISCIPLINE if discipline == "pass" else discipline)
        self.decider = entry.decider()(config, link_bps, sources, seed, max_sources)

    def set_weights(self, weights: list[float]) -> None:
        """Per-aggregate weights (bit/s): ABC reference rates, FFS matrix column (rescaled to C)."""
        w = np.asarray(weights, dtype=np.float64)
        if w.ndim != 1 or not np.all(np.isfinite(w)) or np.any(w <= 0):
            raise ValueError("weights must be a list of finite rates > 0")
        self.decider.set_weights(w)

    def decide(self, src: int, nbytes: int, t_abs: float = 0.0) -> bool:
        """Verdict for one packet; ``t_abs`` is its kernel arrival stamp (wall clock), 0 = read the clock."""
        t = (t_abs if t_abs > 0.0 else self.clock()) - self.t0
        return self.decider.decide(src, t, float(nbytes))

    def __call__(self, pkt: PacketLike) -> None:
        c = self.counts
        c["received"] += 1
        try:
            h = parse_ipv4(pkt.get_payload())
        except Exception:  # noqa: BLE001 -- a packet must never kill the stage
            h = None
        if h is False or h is None:
            c["non_ip" if h is False else "malformed"] += 1
            c["accepted"] += 1
            pkt.accept()
            return
        # The kernel's arrival stamp, not the time we get to the packet: when the
        # stage falls behind and reads a burst, the meters must still see the
        # real spacing (else a virtual FIFO fills with packets that arrived apart).
        stamp = getattr(pkt, "get_timestamp", None)
        t_abs = stamp() if stamp is not None else 0.0
        if t_abs <= 0.0:
            c["unstamped"] += 1
        if self.decide(h[0], h[1] + FRAME_OVERHEAD, t_abs):
            c["accepted"] += 1
            pkt.accept()
        else:
            c["dropped"] += 1
            pkt.drop()


def kernel_queue_counters(queue: int) -> dict[str, int]:
    """This namespace's nfnetlink_queue counters for ``queue`` (empty if not bound)."""
    try:
        with open("/proc/net/netfilter/nfnetlink_queue") as fh:
            for line in fh:
                f = line.split()
                if f and int(f[0]) == queue:
                    return {"queue_total": int(f[2]), "queue_dropped": int(f[5]), "user_dropped": int(f[6])}
    except OSError:
        pass
    return {}


def _write_stats(path: str, stage: Stage, queue: int, cpu0: float) -> None:
    doc = dict(stage.counts)
    doc.update(kernel_queue_counters(queue))
    cpu = time.process_time() - cpu0
    doc["cpu_s"] = cpu
    doc["cpu_per_packet_s"] = cpu / stage.counts["received"] if stage.counts["received"] else math.nan
    doc["time"] = time.time()
    tmp = f"{path}.tmp"
    with open(tmp, "w") as fh:
        json.dump(doc, fh)
    os.replace(tmp, path)


def _load_weights(stage: Stage, path: str) -> None:
    # the writer replaces the file atomically; a missing or bad file keeps the last weights (counted)
    try:
        with open(path) as fh:
            w = json.load(fh)
        stage.set_weights(w)
    except FileNotFoundError:
        return
    except (ValueError, TypeError, OSError):
        stage.counts["bad_weights"] = stage.counts.get("bad_weights", 0) + 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="NFQUEUE bottleneck-discipline stage")
    ap.add_argument("--queue", type=int, required=True)
    from scidmz.disciplines.registry import names

    ap.add_argument("--discipline", choices=(*names(), "pass"), required=True)
    ap.add_argument("--config", default="{}", help="discipline parameters as JSON (SI units)")
    ap.add_argument("--link-bps", type=float, default=0.0, help="bottleneck rate behind the stage (ABC's virtual FIFO)")
    ap.add_argument("--ingress-of", default="{}", help='FFS: JSON {"source IPv4": ingress index}')
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--maxlen", type=int, default=DEFAULT_MAXLEN)
    ap.add_argument("--stats", required=True)
    ap.add_argument("--weights-file", default=None, help="JSON list of per-aggregate weights, re-read every second")
    a = ap.parse_args(argv)
    try:
        cfg = json.loads(a.config)
        ingress_of = json.loads(a.ingress_of)
        stage = Stage(a.discipline, cfg, a.link_bps, ingress_of, a.seed)
    except (ValueError, TypeError) as e:
        print(f"nfqstage: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2
    try:
        from netfilterqueue import COPY_PACKET, NetfilterQueue
    except ModuleNotFoundError:
        print("nfqstage: missing Python module 'netfilterqueue': apt-get install libnetfilter-queue-dev, "
              "then pip install 'scidmz[datapath]'", file=sys.stderr)
        return 2

    stop = False

    def _stop(_sig: int, _frm: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    # Warm the numba core before the first real packet so it never waits on a compile.
    stage.decide(0, 60)
    stage.counts = dict.fromkeys(stage.counts, 0)
    # skb arrival timestamps are only taken while some socket asks for them
    # (the kernel's netstamp_needed switch); this socket is that ask.
    stamp_sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    stamp_sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    nfq = NetfilterQueue()
    cpu0 = time.process_time()
    try:
        nfq.bind(a.queue, stage, max_len=a.maxlen, mode=COPY_PACKET, range=COPY_RANGE, sock_len=SOCK_BYTES)
        fd = nfq.get_fd()
        next_stats = 0.0
        while not stop:
            r, _, _ = select.select([fd], [], [], 0.2)
            if r:
                nfq.run(block=False)
            now = time.monotonic()
            if now >= next_stats:
                if a.weights_file:
                    _load_weights(stage, a.weights_file)
                _write_stats(a.stats, stage, a.queue, cpu0)
                next_stats = now + 1.0
    except OSError as e:
        print(f"nfqstage: {e}", file=sys.stderr)
        return 1
    finally:
        try:
            _write_stats(a.stats, stage, a.queue, cpu0)
        finally:
            nfq.unbind()
            stamp_sock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
