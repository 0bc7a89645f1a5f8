"""The hand-encoded u32 filter requests select exactly the packet bytes pyroute2's requests select."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from scidmz.actuators.htb import HTB_HANDLE, u32_keys, u32_match
from scidmz.actuators.u32batch import u32_filter_request
from scidmz.queueconfig import FlowMatch


def _attrs(buf: bytes) -> dict[int, bytes]:
    out, off = {}, 0
    while off + 4 <= len(buf):
        n, kind = struct.unpack_from("=HH", buf, off)
        out[kind & 0x3FFF] = buf[off + 4: off + n]
        off += (n + 3) & ~3
    return out


def _decode(msg: bytes) -> dict:
    """Type, flags, tcmsg, kind, classid, selector flags, and {packet byte offset: (value, mask)}."""
    ln, kind, flags, _seq, _pid = struct.unpack_from("=IHHII", msg)
    assert ln == len(msg)
    fam, _, _, ifindex, handle, parent, info = struct.unpack_from("=BBHiIII", msg, 16)
    at = _attrs(msg[36:])
    opts = _attrs(at[2])
    sel = opts[5]
    sflags, _offshift, nkeys = struct.unpack_from("=BBB", sel)
    assert len(sel) == 16 + 16 * nkeys
    bytemap: dict[int, tuple[int, int]] = {}
    for i in range(nkeys):
        mask, val = struct.unpack_from(">II", sel, 16 + 16 * i)
        off, offmask = struct.unpack_from("=ii", sel, 16 + 16 * i + 8)
        assert offmask == 0
        for b in range(4):
            m = (mask >> (24 - 8 * b)) & 0xFF
            if m:
                v = (val >> (24 - 8 * b)) & 0xFF
                old = bytemap.get(off + b, (0, 0))
                bytemap[off + b] = (old[0] | (v & m), old[1] | m)
    return {"type": kind, "flags": flags, "tcmsg": (fam, ifindex, handle, parent, info), "kind": at[1],
            "classid": struct.unpack("=I", opts[1])[0], "sel_flags": sflags, "bytes": bytemap}


def _pyroute2(ifindex: int, prio: int, classid: int, m: FlowMatch) -> bytes:
    from pyroute2 import IPBatch

    b = IPBatch()
    try:
        b.tc("add-filter", "u32", ifindex, parent=HTB_HANDLE, prio=prio, protocol=0x0800, target=classid,
             keys=u32_keys(m))
        return bytes(b.asyncore.batch)
    finally:
        b.close()


def _matches(rng: np.random.Generator, n: int) -> list[FlowMatch]:
    out = [FlowMatch(src="10.0.0.9"), FlowMatch(dst="10.2.0.0/16"), FlowMatch(proto=17),
           FlowMatch(src="10.3.0.11", dst="10.2.0.11", sport=0, dport=5201, proto=17),
           FlowMatch(dport=5201, proto=6), FlowMatch(sport=40000, proto=6)]
    for _ in range(n):
        a, b = rng.integers(0, 2**32, 2)
        out.append(FlowMatch(".".join(str((int(a) >> s) & 255) for s in (24, 16, 8, 0)),
                             ".".join(str((int(b) >> s) & 255) for s in (24, 16, 8, 0)) + "/" + str(rng.integers(8, 33)),
                             int(rng.integers(0, 65536)), int(rng.integers(0, 65536)), int(rng.choice([6, 17]))))
    return out


def test_encoding_selects_what_pyroute2_selects() -> None:
    rng = np.random.default_rng(3)
    for i, m in enumerate(_matches(rng, 60)):
        prio, classid = 0xFF00 - i, HTB_HANDLE | (10 + i % 8)
        ours = _decode(u32_filter_request(7 + i, 5, HTB_HANDLE, prio, 0x0800, classid, u32_match(m)))
        ref = _decode(_pyroute2(5, prio, classid, m))
        assert ours == ref, m


def test_request_header_and_sequence() -> None:
    msg = u32_filter_request(1234, 3, HTB_HANDLE, 0x100, 0x0800, HTB_HANDLE | 10, [(0x0A000001, 0xFFFFFFFF, 12)])
    ln, kind, flags, seq, pid = struct.unpack_from("=IHHII", msg)
    assert (ln, kind, seq, pid) == (len(msg), 44, 1234, 0) and len(msg) % 4 == 0
    assert flags & 0x4 and flags & 0x1  # acknowledged request
    assert _decode(msg)["bytes"] == {12: (10, 255), 13: (0, 255), 14: (0, 255), 15: (1, 255)}


@pytest.mark.root
def test_a_refused_rule_is_named_and_the_rest_acknowledged() -> None:
    import subprocess

    from scidmz.actuators.u32batch import BatchError, NetlinkBatch

    ns = "tu32b"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "-n", ns, "link", "add", "v0", "type", "veth", "peer", "name", "v1"], check=True)
        subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "v0", "root", "handle", "5c1e:",
                        "htb"], check=True)
        idx = int(subprocess.run(["ip", "netns", "exec", ns, "cat", "/sys/class/net/v0/ifindex"],
                                 capture_output=True, text=True, check=True).stdout)
        nlb = NetlinkBatch(ns)
        try:
            reqs = [u32_filter_request(nlb.next_seq(), idx, HTB_HANDLE, 0x100, 0x0800, HTB_HANDLE | 10,
                                       [(0x0A000000 + i, 0xFFFFFFFF, 12)]) for i in range(300)]
            nlb.send(reqs)  # 300 rules in three writes
            bad = u32_filter_request(nlb.next_seq(), idx + 1000, HTB_HANDLE, 0x100, 0x0800, HTB_HANDLE | 10,
                                     [(1, 0xFFFFFFFF, 12)])  # no such device
            extra = [u32_filter_request(nlb.next_seq(), idx, HTB_HANDLE, 0x100, 0x0800, HTB_HANDLE | 10,
                                        [(0x0B000000 + i, 0xFFFFFFFF, 12)]) for i in range(3)]
            with pytest.raises(BatchError) as exc:
                nlb.send([extra[0], bad, *extra[1:]])
            assert exc.value.index == 1
            # the owner check's listing: every priority on the root, ours and one someone added with tc
            subprocess.run(["ip", "netns", "exec", ns, "tc", "filter", "add", "dev", "v0", "parent", "5c1e:", "prio",
                            "7", "protocol", "ip", "u32", "match", "ip", "dst", "10.9.9.9/32", "flowid", "5c1e:b"],
                           check=True)
            assert nlb.filter_prios(idx, HTB_HANDLE) == {0x100, 7}
            assert nlb.filter_prios(idx, HTB_HANDLE) == {0x100, 7}  # the socket reads each dump to its end
        finally:
            nlb.close()
        shown = subprocess.run(["ip", "netns", "exec", ns, "tc", "filter", "show", "dev", "v0"],
                               capture_output=True, text=True, check=True).stdout
        assert shown.count("flowid 5c1e:a") == 303 and "flowid 5c1e:b" in shown
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)
