"""The user-space delay stage: per-host base RTT without netem (which this kernel lacks).

Where it sits: a "bump in the wire" namespace between BR2 and the remote
switch S2. The forward direction (campus/DTN data towards the receivers) is
moved in the kernel by a tc ``mirred`` redirect and is never touched by user
space; the reverse direction (ACKs and anything else the receivers send) is
read here from one interface with an AF_PACKET socket, held for the RTT
configured for the *sending receiver's* path, and written out of the other
interface. All of a path's delay sits on the return path, which is
equivalent for TCP (it only sees the RTT) and means user space handles the
ACK rate, not the data rate. The passive taps at BR1 see the full RTT
because the stage is beyond BR1, as the WAN delay is in the MLC testbed
(Vega et al., section 3.1, Fig. 2).

Timing: a frame's hold starts when the *kernel* received it (SO_TIMESTAMPNS
on the receive socket), not when this process got round to reading it, so
a stage that was descheduled for less than a hold still releases every
frame on time. The kernel's stamp is not always the arrival: a frame that
already carries a time (skb->tstamp, e.g. the delivery time the receiver's
TCP gave its ACK, which can be that socket's clock from hundreds of ms
earlier) keeps it across the veths. Measured: stamps 300 ms old on a quiet
machine with this stage at SCHED_FIFO, so some ACKs were held 300 ms too
little, which cut the DTN's kernel min RTT from 50 to 42 ms (a CI failure)
and read as a 20-34 ms late stage (starved periods). So a stamp counts no
earlier than the last time this stage found the socket empty
(``arrival``): nothing it reads now can have arrived before that. The time
frames waited in the socket (``rx_wait_*``) and
the lateness of releases past their deadline (``late_*``) are counted, and
the plant's starvation check (``manage/starvation.py``) reads them.

Ordering: frames are kept in one FIFO per distinct delay value, so two
frames of the same path can never swap; releases across FIFOs go in
deadline order. The stage counts what it receives, sends, fails to send,
kernel socket drops (PACKET_STATISTICS) and reorderings per source (which
must stay 0), and writes them as JSON every second.

Run: ``python -m scidmz.plant.netns.stages.delay --rx b --tx a --table '{"10.2.0.2": 0.1}'``
inside the delay namespace.
"""

from __future__ import annotations

import argparse
import collections
import errno
import json
import os
import select
import signal
import socket
import struct
import sys
import time

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_STATISTICS = 6
PACKET_IGNORE_OUTGOING = 23
SO_RCVBUFFORCE = 33
SO_SNDBUFFORCE = 32
SO_TIMESTAMPNS = 35  # == SCM_TIMESTAMPNS; Python's socket module does not export it
_TS = struct.Struct("qq")

_IPV4 = b"\x08\x00"


def arrival(stamp: float | None, drained: float, now: float) -> float:
    """When a frame reached the stage's socket, on the monotonic clock: the kernel's ``stamp``,
    but no earlier than ``drained`` (the stage last found the socket empty, so the frame came
    after) and no later than ``now`` (module docstring); ``now`` without a stamp."""
    if stamp is None:
        return now
    return min(max(stamp, drained), now)


def _open(ifname: str, rx: bool) -> socket.socket:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    if rx:
        # Frames the kernel sends out of this interface (our own forward redirect)
        # must not be read back as if they came from the receivers.
        s.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
        s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 32 << 20)
        s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    else:
        s.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, 32 << 20)
    s.bind((ifname, ETH_P_ALL))
    s.setblocking(False)
    return s


class DelayStage:
    """Holds each reverse-path frame for ``table[src_ip]`` seconds (``default`` otherwise)."""

    def __init__(self, rx: str, tx: str, table: dict[str, float], default: float = 0.0) -> None:
        self.rx = _open(rx, True)
        self.tx = _open(tx, False)
        self.table = {socket.inet_aton(ip): float(d) for ip, d in table.items()}
        self.default = float(default)
        self.queues: dict[float, collections.deque] = {}
        self.stats = {
            "rx": 0, "tx": 0, "tx_retries": 0, "tx_errors": 0, "kernel_drops": 0,
            "reordered": 0, "held_max": 0, "late_max_s": 0.0, "late_sum_s": 0.0, "late_over_1ms": 0,
            "rx_bytes": 0, "rx_wait_sum_s": 0.0, "rx_wait_max_s": 0.0,
        }
        self._seq = 0
        self._last_seq: dict[bytes, int] = {}
        self._held = 0
        self._stop = False

    def stop(self, *_: object) -> None:
        self._stop = True

    def _kernel_drops(self) -> None:
        raw = self.rx.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8)
        _, drops = struct.unpack("II", raw)  # reading resets the kernel counters
        self.stats["kernel_drops"] += drops

    def _send(self, frame: bytes) -> None:
        for _ in range(200):
            try:
                self.tx.send(frame)
                self.stats["tx"] += 1
                return
            except BlockingIOError:
                pass
            except OSError as exc:
                if exc.errno not in (errno.ENOBUFS, errno.EAGAIN):
                    self.stats["tx_errors"] += 1
                    return
            # A full device queue is back-pressure, not a reason to drop.
            self.stats["tx_retries"] += 1
            select.select([], [self.tx], [], 0.001)
        self.stats["tx_errors"] += 1

    def _release(self, now: float) -> float | None:
        """Send every frame whose deadline passed; return the next deadline or None."""
        st = self.stats
        while True:
            best_q = None
            best = None
            for q in self.queues.values():
                if q and (best is None or q[0][0] < best):
                    best, best_q = q[0][0], q
            if best_q is None:
                return None
            if best > now:
                return best
            deadline, seq, key, frame = best_q.popleft()
            self._held -= 1
            late = now - deadline
            st["late_sum_s"] += late
            if late > 1e-3:
                st["late_over_1ms"] += 1
                if late > st["late_max_s"]:
                    st["late_max_s"] = late
            if key is not None:
                if self._last_seq.get(key, -1) > seq:
                    st["reordered"] += 1
                self._last_seq[key] = seq
            self._send(frame)
            # A send runs the receiving stack (ACK processing, the data it clocks
            # out) in this context, so time moves on within a batch.
            if now != float("inf"):
                now = time.monotonic()

    def run(self, stats_path: str | None = None, stats_every: float = 1.0) -> None:
        st = self.stats
        rx = self.rx
        table = self.table
        default = self.default
        queues = self.queues
        mono = time.monotonic
        next_stats = mono() + stats_every
        timeout = stats_every
        drained = mono()  # the socket was last seen empty then (``arrival``)
        while not self._stop:
            try:
                r, _, _ = select.select([rx], [], [], timeout)
            except InterruptedError:
                r = []
            now = mono()
            if r:
                # Kernel timestamps are CLOCK_REALTIME; holds run on the monotonic clock.
                off = time.time() - now
                while True:
                    try:
                        frame, anc, _, _ = rx.recvmsg(65536, 64)
                    except (BlockingIOError, InterruptedError):
                        drained = mono()
                        break
                    stamp = None
                    for level, typ, data in anc:
                        if level == socket.SOL_SOCKET and typ == SO_TIMESTAMPNS and len(data) >= 16:
                            sec, nsec = _TS.unpack_from(data)
                            stamp = sec + nsec * 1e-9 - off
                    arrived = arrival(stamp, drained, now)
                    wait = now - arrived
                    st["rx_wait_sum_s"] += wait
                    if wait > st["rx_wait_max_s"]:
                        st["rx_wait_max_s"] = wait
                    st["rx"] += 1
                    st["rx_bytes"] += len(frame)
                    key = None
                    d = default
                    if frame[12:14] == _IPV4 and len(frame) >= 34:
                        key = frame[26:30]
                        d = table.get(key, default)
                    if d <= 0.0:
                        self._send(frame)
                        continue
                    q = queues.get(d)
                    if q is None:
                        q = queues[d] = collections.deque()
                    q.append((arrived + d, self._seq, key, frame))
                    self._seq += 1
                    self._held += 1
                    if self._held > st["held_max"]:
                        st["held_max"] = self._held
                    if self._seq & 31 == 0:
                        # A long burst of arrivals must not hold back frames already due.
                        now = mono()
                        self._release(now)
                now = mono()
            nxt = self._release(now)
            if now >= next_stats:
                next_stats = now + stats_every
                self._write_stats(stats_path)
            wake = next_stats if nxt is None else min(nxt, next_stats)
            timeout = max(wake - mono(), 0.0)
        # Flush what is held so a clean stop loses nothing in flight.
        self._release(float("inf"))
        self._write_stats(stats_path)

    def _write_stats(self, path: str | None) -> None:
        self._kernel_drops()
        if not path:
            return
        out = dict(self.stats, held=self._held, t=time.time(), pid=os.getpid())
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump(out, f)
        os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rx", required=True, help="interface to read the reverse path from")
    ap.add_argument("--tx", required=True, help="interface to write delayed frames to")
    ap.add_argument("--table", required=True, help='JSON {"src ip": delay_s, ...}')
    ap.add_argument("--default", type=float, default=0.0, help="delay for other frames, s")
    ap.add_argument("--stats", default=None, help="write counters here as JSON every second")
    ap.add_argument("--rt-priority", type=int, default=10,
                    help="SCHED_FIFO priority for punctual releases (0: normal scheduling)")
    a = ap.parse_args(argv)
    if a.rt_priority > 0:
        try:
            # A blocked select() costs nothing; real-time priority only makes
            # wake-ups on time when the 2 cores are busy with TCP and iperf3.
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(a.rt_priority))
        except OSError:
            pass
    stage = DelayStage(a.rx, a.tx, json.loads(a.table), a.default)
    signal.signal(signal.SIGTERM, stage.stop)
    signal.signal(signal.SIGINT, stage.stop)
    stage.run(a.stats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
