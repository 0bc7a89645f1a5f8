"""The MLC paper's actuator: a token bucket filter (tc TBF) as root qdisc of a device.

In the paper (Vega et al., section 3.1 and Fig. 2) the controller sets the
rate of a TBF on S1-eth1, the campus switch's uplink, once per period T.
``TbfActuator`` does exactly that through pyroute2 (netlink, no ``tc``
process): ``set_rate`` installs a TBF as the root qdisc of ``dev`` and then
changes its rate, ``current_rate`` reads the rate back from the kernel, ``close``
deletes the TBF so the kernel's default root qdisc comes back. A root qdisc an
admin puts on ``dev`` while it runs (or one hung below ours) is never replaced
or deleted: ``set_rate`` raises ``ForeignConfigError`` from then on and ``close``
leaves it (``rootqdisc.RootQdisc.check``).

Derived parameters, when not given (tc-tbf(8) rules):

* burst (bucket size, bytes) >= rate / HZ: the bucket must hold the tokens
  that arrive in one timer tick, otherwise the shaper cannot reach its rate;
  and >= two full frames (MTU + Ethernet header), or no packet ever fits.
  HZ is the kernel's ``CONFIG_HZ`` (1/HZ is the coarsest timer granularity a
  qdisc watchdog can see), 1000 when the kernel config is not readable.
* limit (queue, bytes) = rate x latency + burst, as tc computes it from
  ``latency``.

Rates: the kernel's TBF parameter block holds the rate as 32-bit bytes/s,
so the resolution is 8 bit/s and the largest rate ~34.3 Gbit/s. A command
of 0 bit/s applies ``MIN_RATE`` (8 kbit/s, see ``actuators.base``): a TBF
cannot have rate 0.
"""

from __future__ import annotations

import errno
import functools
import gzip
import math
import platform
import threading
from pathlib import Path

from ..units import ETH_HLEN
from .base import ActuatorError, check_rate
from .rootqdisc import RootQdisc

__all__ = ["TbfActuator", "kernel_hz", "kernel_config", "derive_burst", "MAX_RATE", "TBF_HANDLE"]

#: Largest rate the 32-bit bytes/s field of ``tc_tbf_qopt`` holds.
MAX_RATE = float((2**32 - 1) * 8)
#: Our qdisc handle ("5c1d:"), so leftovers are recognisable and nothing else is deleted.
TBF_HANDLE = 0x5C1D0000


@functools.cache
def _kernel_config() -> dict[str, str]:
    for path in (Path("/proc/config.gz"), Path(f"/boot/config-{platform.release()}")):
        try:
            raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        except OSError:
            continue
        out = {}
        for line in raw.decode(errors="replace").splitlines():
            if line.startswith("CONFIG_") and "=" in line:
                key, val = line.split("=", 1)
                out[key] = val.strip('"')
        return out
    return {}


def kernel_config(key: str) -> str | None:
    """A value of the running kernel's build config (``/proc/config.gz``), None if absent/unreadable."""
    return _kernel_config().get(key)


def kernel_hz() -> int:
    """The kernel's CONFIG_HZ (timer ticks per second), 1000 if the config is unreadable."""
    try:
        return int(kernel_config("CONFIG_HZ") or 1000)
    except ValueError:
        return 1000


def derive_burst(bps: float, mtu: int, hz: int | None = None) -> int:
    """Bucket size in bytes for rate ``bps``: max(rate/HZ, 2 full frames) (tc-tbf(8))."""
    hz = hz or kernel_hz()
    return int(math.ceil(max(bps / 8.0 / hz, 2 * (mtu + ETH_HLEN))))


def _check_rate(bps: float) -> float:
    return check_rate(bps, "TBF", MAX_RATE, f"the kernel TBF maximum {MAX_RATE:.0f} bit/s")


class TbfActuator:
    """Root TBF on ``dev`` (optionally inside network namespace ``netns``), set through pyroute2.

    ``burst`` (bytes) and ``latency`` (s of queue before the TBF drops) are
    fixed if given; otherwise the burst follows the rate (see module doc).
    The actuator refuses to start on a device whose root qdisc was configured
    by someone else (an explicit handle): it could not restore that qdisc's
    classes and filters on ``close``. A kernel default root (noqueue,
    pfifo_fast, mq, fq_codel with handle 0) is replaced and comes back when
    the TBF is deleted. Thread-safe: one netlink socket guarded by a lock.
    """

    def __init__(
        self,
        dev: str,
        netns: str | None = None,
        burst: float | None = None,
        latency: float = 0.05,
    ) -> None:
        if burst is not None and not (math.isfinite(burst) and burst > 0):
            raise ValueError(f"TBF burst must be a positive number of bytes, got {burst!r}")
        if not (isinstance(latency, int | float) and math.isfinite(latency) and latency > 0):
            raise ValueError(f"TBF latency must be a positive number of seconds, got {latency!r}")
        self.dev = dev
        self.netns = netns
        self.burst = None if burst is None else float(burst)
        self.latency = float(latency)
        self._lock = threading.Lock()
        self._installed = False
        self._closed = False
        self._root = RootQdisc(dev, netns, TBF_HANDLE, "tbf", "TbfActuator")
        try:
            self.index = self._root.index
            self.mtu = self._root.mtu()
        except BaseException:
            self._root.close()
            raise
        self.previous_root = self._root.previous_kind

    # -- RateActuator -------------------------------------------------------------
    def parameters(self, bps: float) -> dict[str, int]:
        """The TBF parameters ``set_rate(bps)`` applies: rate (bytes/s), burst and limit (bytes)."""
        rate = _check_rate(bps)
        burst = int(self.burst) if self.burst is not None else derive_burst(rate, self.mtu)
        limit = int(rate / 8.0 * self.latency + burst)
        return {"rate": int(round(rate / 8.0)), "burst": burst, "limit": limit}

    def set_rate(self, bps: float) -> None:
        """Set our root TBF to ``bps`` bit/s (0 -> ``MIN_RATE``); ValueError on bad input,
        ``ForeignConfigError`` (nothing changed) once the root is someone else's (``RootQdisc.check``)."""
        p = self.parameters(bps)
        with self._lock:
            if self._closed:
                raise RuntimeError(f"TbfActuator on '{self.dev}' is closed")
            from pyroute2.netlink.exceptions import NetlinkError

            self._root.check(self._installed)
            try:
                # "add" (create, never replace) the first time, "change" (only our handle, never create)
                # after: the kernel refuses either if someone else's root stands there by then, so an
                # admin's qdisc that appears between the check and this call is never replaced.
                self._root.ipr.tc(
                    "change" if self._installed else "add", "tbf", self.index, handle=TBF_HANDLE,
                    rate=f"{p['rate'] * 8}bit", burst=p["burst"], limit=p["limit"],
                )
            except (NetlinkError, OSError) as exc:
                if getattr(exc, "code", None) in (errno.EEXIST, errno.ENOENT):
                    self._root.check(self._installed)
                raise ActuatorError(f"kernel refused TBF on '{self.dev}' at {bps:.0f} bit/s: {exc}") from None
            self._installed = True

    def current_rate(self) -> float:
        """The rate of our TBF as the kernel holds it (bit/s); ActuatorError if it is gone."""
        from pyroute2.netlink.exceptions import NetlinkError

        with self._lock:
            try:
                q = self._root.ours() if not self._closed else None
            except (NetlinkError, OSError) as exc:
                raise ActuatorError(f"cannot read the qdiscs of '{self.dev}': {exc}") from None
        if q is None:
            raise ActuatorError(f"no scidmz TBF is installed on '{self.dev}'")
        parms = q.get_attr("TCA_OPTIONS").get_attr("TCA_TBF_PARMS")
        return float(parms["rate"]) * 8.0

    def kernel_parameters(self) -> dict[str, int]:
        """rate (bytes/s), limit (bytes) and buffer (kernel ticks) of the installed TBF."""
        with self._lock:
            q = self._root.ours()
        if q is None:
            raise ActuatorError(f"no scidmz TBF is installed on '{self.dev}'")
        parms = q.get_attr("TCA_OPTIONS").get_attr("TCA_TBF_PARMS")
        return {"rate": int(parms["rate"]), "limit": int(parms["limit"]), "buffer": int(parms["buffer"])}

    def close(self) -> None:
        """Delete our TBF (only if it is still ours) so the default root qdisc returns."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                if self._installed:
                    self._root.delete_ours()
            finally:
                self._root.close()

    def __enter__(self) -> TbfActuator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = f", netns={self.netns!r}" if self.netns else ""
        return f"TbfActuator(dev={self.dev!r}{where})"
