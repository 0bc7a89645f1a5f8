"""``RootQdisc``: one device's root qdisc through a pyroute2 ``IPRoute``, owned under a fixed handle.

What the TBF and the HTB actuators share: each owns the root qdisc of one
device (optionally inside a network namespace) under its own handle. Opening
checks that the namespace and the device exist and refuses a device whose
root qdisc someone else configured (an explicit handle: its classes and
filters could not be restored); a kernel default root (noqueue, pfifo_fast,
mq, fq_codel with handle 0) is fine, it comes back when ours is deleted.
``delete_ours`` removes our root only if it is still ours; ``close`` closes
the netlink socket. An owner record (``owner.claim``) names the process that
holds the device's root: a fresh start reclaims the root a dead scidmz left
under our handle (a SIGKILLed controller's TBF, or its HTB tree with the u32
filters under it), and refuses one a live scidmz holds or that no record
accounts for. Errors are one line: ``ValueError`` for bad input,
``RuntimeError`` when netlink cannot be opened. pyroute2 is imported here only.

While it runs, what is ours is told from what is not by the handle and kind
we installed (and, for what hangs below our root, by the handles the
actuator gives its own children): ``check`` finds an admin's root qdisc put
on the device in our place, our root deleted, or an admin's qdisc attached
below ours, and from then on the actuator is *displaced*: ``check`` raises
``ForeignConfigError`` without touching anything, and ``delete_ours``
deletes nothing (deleting our root would delete what hangs below it). The
owner record is still given up at close, so a later start refuses a root of
ours that no record accounts for instead of removing it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .base import ActuatorError, ForeignConfigError
from .owner import OwnerClaim, claim

__all__ = ["RootQdisc", "TC_H_ROOT"]

TC_H_ROOT = 0xFFFFFFFF
# ENOENT, ENODEV, EINVAL: the device or the namespace went first; nothing is left to delete.
_GONE = (2, 19, 22)

log = logging.getLogger("scidmz.actuators")


def _default_child(handle: int) -> bool:
    """A qdisc below our root that the kernel made for it (handle 0: a TBF's inner bfifo)."""
    return handle == 0


class RootQdisc:
    """The root qdisc of ``dev`` that ``owner`` installs with ``handle`` and ``kind`` (see module doc)."""

    def __init__(self, dev: str, netns: str | None, handle: int, kind: str, owner: str,
                 own_child: Callable[[int], bool] = _default_child,
                 own_filter: Callable[[int], bool] | None = None) -> None:
        """``own_child(handle)``: whether a qdisc with that handle below our root is one the actuator
        makes itself (the HTB's bfifos); any other there is someone else's. ``own_filter(prio)``: the
        same for a filter on our root (None: the kind takes no filters, e.g. a classless TBF)."""
        #: Why what we installed is no longer ours to change (None: it still is); see the module doc.
        self.displaced: str | None = None
        self._own_child, self._own_filter = own_child, own_filter
        #: The priorities of the filters on our root, if the actuator has a faster way to list them
        #: than pyroute2's dump (the HTB's raw socket, ``u32batch.NetlinkBatch.filter_prios``).
        self.filter_prios: Callable[[], set[int]] | None = None
        if not dev or not isinstance(dev, str):
            raise ValueError(f"{owner} needs a device name, got {dev!r}")
        if netns is not None and not Path("/var/run/netns", netns).exists():
            raise ValueError(f"network namespace '{netns}' does not exist")
        self.dev, self.netns, self.handle, self.kind = dev, netns, handle, kind
        self.where = f"'{dev}'" + (f" in namespace '{netns}'" if netns else "")
        from pyroute2 import IPRoute

        try:
            self.ipr = IPRoute(netns=netns) if netns is not None else IPRoute()
        except OSError as exc:
            raise RuntimeError(f"cannot open netlink for namespace {netns!r}: {exc}") from None
        try:
            found = self.ipr.link_lookup(ifname=dev)
            if not found:
                raise ValueError(f"no network device '{dev}'" + (f" in namespace '{netns}'" if netns else ""))
            self.index = int(found[0])
            prev = self.root()
            if prev is not None and prev["handle"] not in (0, handle):
                raise ValueError(
                    f"device '{dev}' already has a configured root qdisc '{prev.get_attr('TCA_KIND')}' "
                    f"(handle {prev['handle'] >> 16:x}:); refusing to replace what it could not restore"
                )
            self.claim = self._claim(prev)
            if self.claim.reclaimed is not None:
                prev = self.root()
            #: The kind of the root qdisc found at start (None: none), e.g. "noqueue".
            self.previous_kind: str | None = None if prev is None else prev.get_attr("TCA_KIND")
        except BaseException:
            self.ipr.close()
            raise

    def _claim(self, prev: Any | None) -> OwnerClaim:
        """Our owner record for this device's root; a dead scidmz's root under our handle is removed
        (with its classes and filters), one a live scidmz holds or that no record accounts for is refused."""
        where = f"'{self.dev}'" + (f" in namespace '{self.netns}'" if self.netns else "")
        h = f"{self.handle >> 16:x}:"
        c = claim(f"tc-{self.netns or 'host'}-{self.dev}-{h[:-1]}", f"the root {self.kind} {h} of {where}")
        left = prev is not None and prev["handle"] == self.handle
        if left and c.reclaimed is None:
            c.release()
            ns = f"ip netns exec {self.netns} " if self.netns else ""
            raise ValueError(f"{where} has a root qdisc {h} that no live or dead scidmz record accounts for "
                             f"(an older scidmz, or another tool); check it, then `{ns}tc qdisc del dev {self.dev} root`")
        if left:
            try:
                # A dead scidmz's tree, whole: its rules' priorities are its own, not this instance's.
                self._delete_root()
            except BaseException:
                c.release()
                raise
        return c

    def mtu(self) -> int:
        """The device's MTU (1500 when the kernel does not say)."""
        return int(self.ipr.get_links(self.index)[0].get_attr("IFLA_MTU") or 1500)

    def root(self) -> Any | None:
        """The device's root qdisc message, whoever installed it (None: none)."""
        for q in self.ipr.get_qdiscs(index=self.index):
            if q["parent"] == TC_H_ROOT and q["index"] == self.index:
                return q
        return None

    def ours(self) -> Any | None:
        """The root qdisc if it is ours (our handle and kind), else None."""
        q = self.root()
        if q is not None and q["handle"] == self.handle and q.get_attr("TCA_KIND") == self.kind:
            return q
        return None

    def foreign_below(self) -> list[str]:
        """Qdiscs ("pfifo 77:") and filters on our root ("u32 filter prio 7") that someone else attached,
        which deleting ours would delete."""
        major = self.handle >> 16
        out = [f"{q.get_attr('TCA_KIND')} {q['handle'] >> 16:x}:" for q in self.ipr.get_qdiscs(index=self.index)
               if q["parent"] != TC_H_ROOT and q["parent"] >> 16 == major and q["handle"] >> 16 != major
               and not self._own_child(q["handle"])]
        if self._own_filter is not None:
            prios = (self.filter_prios() if self.filter_prios is not None
                     else {f["info"] >> 16 for f in self.ipr.get_filters(index=self.index, parent=self.handle)})
            out += [f"a filter at priority {p} on it" for p in sorted(prios) if not self._own_filter(p)]
        return out

    def check(self, installed: bool) -> None:
        """ForeignConfigError, naming what was found, if the device's root is not ours to change: after
        we installed ours (``installed``) it is gone or has someone else's qdisc below it; before, a
        root someone configured has appeared. Once displaced, always displaced (nothing is read)."""
        if self.displaced is None:
            from pyroute2.netlink.exceptions import NetlinkError

            try:
                q = self.root()
                ours = self.ours()
                below = self.foreign_below() if ours is not None else []
                if ours is None:
                    # A device that went away took our root with it: a failure, not an admin's root.
                    self.ipr.get_links(self.index)
            except (NetlinkError, OSError) as exc:
                raise ActuatorError(f"cannot read the qdiscs of {self.where} (gone?): {exc}") from None
            h = f"{self.handle >> 16:x}:"
            if below:
                self.displaced = (f"someone attached {', '.join(below)} below the scidmz {self.kind} {h} on "
                                  f"{self.where}")
            elif installed and self.ours() is None:
                self.displaced = f"the scidmz {self.kind} {h} on {self.where} was replaced by {_describe(q)}"
            elif not installed and q is not None and q["handle"] != 0:
                self.displaced = f"{_describe(q)} appeared on {self.where} before scidmz installed its {self.kind}"
            if self.displaced is not None:
                self.displaced += "; scidmz leaves it as it is and changes nothing there until restarted"
                log.warning("%s", self.displaced)
        if self.displaced is not None:
            raise ForeignConfigError(self.displaced)

    def delete_ours(self) -> None:
        """Delete our root qdisc (and all under it) if it is still ours and nothing of someone else's
        hangs below it (then it stays, and the log says so); a vanished device is fine."""
        if self.displaced is not None:
            return  # ours is gone, or deleting it would delete someone else's
        try:
            self.check(installed=True)
        except ForeignConfigError:
            if self.ours() is not None:
                log.warning("left the scidmz %s on %s in place: %s", self.kind, self.where, self.displaced)
            return
        except ActuatorError:
            return  # the device or its namespace went first, and our root with it
        self._delete_root()

    def _delete_root(self) -> None:
        """Delete the root under our handle, all below it included. The kernel deletes only a root that
        has our handle (EINVAL otherwise), so another root that appeared meanwhile is never deleted."""
        from pyroute2.netlink.exceptions import NetlinkError

        try:
            self.ipr.tc("del", index=self.index, handle=self.handle, parent=TC_H_ROOT)
        except NetlinkError as exc:
            if exc.code not in _GONE:
                raise

    def close(self) -> None:
        """Close the netlink socket and give up the owner record (after ``delete_ours``)."""
        try:
            self.ipr.close()
        finally:
            claim_ = getattr(self, "claim", None)
            if claim_ is not None:
                claim_.release()


def _describe(q: Any | None) -> str:
    """What a root qdisc is, for a message: "htb 1:", or the kernel's default."""
    if q is None:
        return "no root qdisc"
    if q["handle"] == 0:
        return f"the kernel's default root qdisc ({q.get_attr('TCA_KIND')}; ours was deleted)"
    return f"a root qdisc {q.get_attr('TCA_KIND')} {q['handle'] >> 16:x}: that scidmz did not make"
