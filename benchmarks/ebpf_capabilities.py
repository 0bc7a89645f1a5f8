"""Which capabilities ``scidmz control run`` with the eBPF telemetry needs (root); prints one JSON object.

The unit (``deploy/systemd/scidmz-control.service``) grants a service only
what it needs. What the kernel asks for is measured here, not assumed: the
daemon (``--plant hardware --telemetry ebpf:lan0,wan0 --dev wan0``, the TBF
actuator, 2 periods) runs as uid 0 with its capability bounding set cut to
each candidate set (``setpriv --bounding-set``; uid 0 then holds exactly
those), on a router namespace between two hosts:

* ``inside``: the daemon started inside the router's namespace (a real
  router: the interfaces are the daemon's own);
* ``netns``: started in the host's namespace with ``--netns ROUTER`` (setns).

Each run's outcome (exit code, the last line) and whether anything was left
on the router's interfaces afterwards. The result for this kernel:
CAP_BPF + CAP_PERFMON + CAP_NET_ADMIN, and CAP_SYS_ADMIN for ``--netns``.

Run: python benchmarks/ebpf_capabilities.py [--out reports/ebpf/capabilities.json] (as root)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

SETS = ("", "net_admin", "bpf", "bpf,perfmon", "net_admin,bpf", "net_admin,perfmon", "net_admin,bpf,perfmon")
NETNS_SETS = ("net_admin,bpf,perfmon", "net_admin,bpf,perfmon,sys_admin")


def _sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, check=check, capture_output=True, text=True, timeout=60)


def _run(caps: str, where: str, ns: dict[str, str], tmp: Path) -> dict[str, Any]:
    bounding = ",".join(["-all", *(f"+{c}" for c in caps.split(",") if c)])
    cmd = [sys.executable, "-m", "scidmz.cli", "control", "run", "testbed", "--plant", "hardware",
           "--telemetry", "ebpf:lan0,wan0", "--dev", "wan0", "--target", "40M", "--duration", "2", "--no-api",
           "--log", str(tmp / "log.jsonl"), "--json"]
    if where == "netns":
        cmd += ["--netns", ns["r"]]
    argv = ["setpriv", "--bounding-set", bounding, "--inh-caps", "-all", "--", *cmd]
    if where == "inside":
        argv = ["ip", "netns", "exec", ns["r"], *argv]
    env = {**os.environ, "SCIDMZ_RUN_DIR": str(tmp / "run")}
    r = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
    last = (r.stdout.strip().splitlines() or [""])[-1] if r.returncode == 0 else r.stderr.strip().splitlines()[-1]
    left = _sh("tc", "-n", ns["r"], "qdisc", "show").stdout + _sh("tc", "-n", ns["r"], "filter", "show", "dev",
                                                                 "lan0", "ingress").stdout
    return {"capabilities": [f"CAP_{c.upper()}" for c in caps.split(",") if c], "where": where,
            "exit": r.returncode, "ok": r.returncode == 0, "last_line": last,
            "left_on_router": [x for x in left.splitlines() if "noqueue" not in x]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("benchmarks/ebpf_capabilities.py needs root", file=sys.stderr)
        return 2
    p = f"ek{os.getpid() % 10000}"
    ns = {k: p + k for k in "arb"}
    runs = []
    try:
        for n in ns.values():
            _sh("ip", "netns", "add", n)
            _sh("ip", "netns", "exec", n, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1")
        _sh("ip", "-n", ns["r"], "link", "add", "lan0", "type", "veth", "peer", "name", "a0", "netns", ns["a"])
        _sh("ip", "-n", ns["r"], "link", "add", "wan0", "type", "veth", "peer", "name", "b0", "netns", ns["b"])
        for n, dev in ((ns["r"], "lan0"), (ns["r"], "wan0"), (ns["a"], "a0"), (ns["b"], "b0")):
            _sh("ip", "-n", n, "link", "set", dev, "up")
        with tempfile.TemporaryDirectory() as d:
            for caps in SETS:
                runs.append(_run(caps, "inside", ns, Path(d)))
            for caps in NETNS_SETS:
                runs.append(_run(caps, "netns", ns, Path(d)))
    finally:
        for n in ns.values():
            _sh("ip", "netns", "del", n, check=False)
    need = [r["capabilities"] for r in runs if r["ok"] and r["where"] == "inside"]
    res = {"benchmark": "ebpf_capabilities", "kernel": platform.release(), "runs": runs,
           "minimal_inside": min(need, key=len) if need else None,
           "minimal_netns": min((r["capabilities"] for r in runs if r["ok"] and r["where"] == "netns"), key=len,
                                default=None)}
    if a.out:
        Path(a.out).write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
