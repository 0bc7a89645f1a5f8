"""Flows on real sockets: Weibull short flows (MLC Table 6) and the fixed-size DTN transfer.

Short flows (MLC paper, section 4.5 and Table 6):

A client in a campus namespace opens one TCP connection per flow, sends a
Weibull-distributed number of bytes, half-closes, and waits for the
server's close; the flow completion time (FCT) is connect to close, as an
application sees it. Gaps between flow starts are Weibull too; both are
clipped to [min, max] as in Table 6. The same seed gives the same sequence
of (gap, size) pairs.

Run ``python -m scidmz.plant.netns.traffic.sockflows server --port 5300`` in the
receiver's namespace and ``... client --dst IP --port 5300 --seed S --out F``
in the sender's; the client appends one JSON line per finished flow to F.

The DTN transfer (``bulk``): ``--streams`` parallel connections share
``--bytes`` (GridFTP style) and the FCT is the time until the server has
read and closed the *last* stream, i.e. every byte delivered. ``iperf3 -n``
cannot give this: it stops when the last byte is *written* into the socket
buffer and its server closes the data sockets at TEST_END, resetting what
is still in flight (measured here: 5.05 MB sent, 3.1 MB received).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import socket
import sys
import time

import numpy as np

__all__ = ["weibull_schedule", "bulk_transfer", "main"]

_CHUNK = memoryview(bytes(256 * 1024))


def weibull_schedule(
    rng: np.random.Generator,
    n: int,
    gap_shape: float,
    gap_scale: float,
    gap_min: float,
    gap_max: float,
    size_shape: float,
    size_scale: float,
    size_min: float,
    size_max: float,
) -> tuple[np.ndarray, np.ndarray]:
    """``n`` (gap s, size bytes) draws: scale x Weibull(shape), clipped (MLC Table 6)."""
    gaps = np.clip(gap_scale * rng.weibull(gap_shape, n), gap_min, gap_max)
    sizes = np.clip(size_scale * rng.weibull(size_shape, n), size_min, size_max).astype(np.int64)
    return gaps, sizes


async def _serve(port: int) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await reader.read(1 << 18):
                pass
        except ConnectionError:
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "0.0.0.0", port, backlog=1024, reuse_address=True)
    async with server:
        await server.serve_forever()


async def _one_flow(dst: str, port: int, size: int, cca: str, out: list[dict]) -> None:
    t0 = time.monotonic()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cca.encode())
        sock.setblocking(False)
        loop = asyncio.get_running_loop()
        await loop.sock_connect(sock, (dst, port))
        reader, writer = await asyncio.open_connection(sock=sock)
        left = size
        while left > 0:
            n = min(left, len(_CHUNK))
            writer.write(_CHUNK[:n])
            await writer.drain()
            left -= n
        writer.write_eof()
        await reader.read()  # server closes after reading everything: all bytes delivered
        writer.close()
        out.append({"t": time.time(), "size": size, "fct": time.monotonic() - t0, "ok": True})
    except (OSError, asyncio.IncompleteReadError) as exc:
        sock.close()
        out.append({"t": time.time(), "size": size, "fct": time.monotonic() - t0, "ok": False, "error": str(exc)})


async def _client(a: argparse.Namespace) -> None:
    rng = np.random.default_rng(a.seed)
    done: list[dict] = []
    tasks: set[asyncio.Task] = set()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    with open(a.out, "a", buffering=1) as f:
        while not stop.is_set():
            gaps, sizes = weibull_schedule(
                rng, 256, a.gap_shape, a.gap_scale, a.gap_min, a.gap_max,
                a.size_shape, a.size_scale, a.size_min, a.size_max,
            )
            for gap, size in zip(gaps, sizes, strict=True):
                try:
                    await asyncio.wait_for(stop.wait(), timeout=float(gap))
                    break
                except TimeoutError:
                    pass
                if len(tasks) < a.max_active:
                    t = asyncio.create_task(_one_flow(a.dst, a.port, int(size), a.cca, done))
                    tasks.add(t)
                    t.add_done_callback(tasks.discard)
                while done:
                    f.write(json.dumps(done.pop(0)) + "\n")
        for t in tasks:
            t.cancel()


async def bulk_transfer(dst: str, port: int, total: int, streams: int, cca: str) -> dict:
    """Send ``total`` bytes over ``streams`` parallel TCP connections; FCT = last stream delivered."""
    per = [total // streams + (1 if i < total % streams else 0) for i in range(streams)]
    out: list[dict] = []
    t0 = time.monotonic()
    await asyncio.gather(*(_one_flow(dst, port, n, cca, out) for n in per))
    fct = time.monotonic() - t0
    ok = all(r["ok"] for r in out)
    return {
        "bytes": total, "streams": streams, "cca": cca, "ok": ok, "fct": fct,
        "stream_fct": sorted(r["fct"] for r in out),
        "errors": [r.get("error") for r in out if not r["ok"]],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("server")
    s.add_argument("--port", type=int, default=5300)
    c = sub.add_parser("client")
    c.add_argument("--dst", required=True)
    c.add_argument("--port", type=int, default=5300)
    c.add_argument("--seed", type=int, required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--cca", default="cubic")
    c.add_argument("--max-active", type=int, default=256)
    for name, default in (
        ("gap-shape", 0.5), ("gap-scale", 0.020), ("gap-min", 0.001), ("gap-max", 0.100),
        ("size-shape", 0.5), ("size-scale", 100e3), ("size-min", 10e3), ("size-max", 10e6),
    ):
        c.add_argument(f"--{name}", type=float, default=default)
    b = sub.add_parser("bulk")
    b.add_argument("--dst", required=True)
    b.add_argument("--port", type=int, default=5300)
    b.add_argument("--bytes", type=int, required=True)
    b.add_argument("--streams", type=int, default=8)
    b.add_argument("--cca", default="cubic")
    a = ap.parse_args(argv)
    if a.mode == "bulk":
        res = asyncio.run(bulk_transfer(a.dst, a.port, a.bytes, a.streams, a.cca))
        print(json.dumps(res), flush=True)
        return 0 if res["ok"] else 1
    if a.mode == "server":
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        try:
            asyncio.run(_serve(a.port))
        except (KeyboardInterrupt, SystemExit):
            pass
    else:
        asyncio.run(_client(a))
    return 0


if __name__ == "__main__":
    sys.exit(main())
