"""ABC and FFS in a P4 switch at the bottleneck (``plant.hardware_discipline``), from ``control run``.

* Bad input is one line, exit 2, before the switch changes: a pipeline folder without its JSON or
  P4Info, a switch that does not answer, a port that is not a P4Runtime server, an address that is
  not ``p4:HOST:PORT`` (no root needed).
* Root, the rehearsal (``plant.netns.p4lab``): a real ``simple_switch_grpc`` forwards the DTN's and a
  campus host's TCP flows to a receiver through a 10 Mbit/s TBF; ``control run --plant hardware
  --policy abc|ffs --discipline p4:...`` loads the discipline, installs its tables and sets the
  weights of the target (7 of 10 Mbit/s) every period. The same flows then cross the NFQUEUE
  stage (``plant.netns.nfqlab``, the netns plant's discipline) with the same link, buffer and
  weights, and the DTN's share of the goodput is compared: the gap is printed and bounded. A clean
  stop leaves the switch a wire with no entry and no owner record; a SIGKILLed controller's
  entries are reclaimed by the next start; entries no record accounts for are refused.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

SRC = str(Path(__file__).parents[1] / "src")
CLI = [sys.executable, "-m", "scidmz.cli"]
LINK, BUFFER, TARGET, SECONDS = 10e6, 36000, 7e6, 10
P = "pd"  # namespaces pda-s, pda-r, pda-d (the P4 lab), pdn-* (the NFQUEUE lab)


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=90,
                          env={**os.environ, "PYTHONPATH": SRC, **(env or {})})


def _run(*extra: str) -> subprocess.CompletedProcess[str]:
    return _cli("control", "run", "testbed", "--plant", "hardware", "--policy", "abc", "--target", "7M",
                "--no-api", "--telemetry", "ebpf:pdnone0,pdnone1", *extra)


def test_bad_input_is_one_line_exit_2(tmp_path: Path) -> None:
    (tmp_path / "only.json").write_text("{}")
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()  # accepts TCP, speaks no gRPC
    try:
        cases = [
            (["--discipline", "p4:127.0.0.1:9559", "--plant-opt", f"discipline_pipeline={tmp_path}"],
             "missing the P4Info"),
            (["--discipline", "p4:127.0.0.1:1"], "the discipline switch at 127.0.0.1:1 does not answer"),
            (["--discipline", f"p4:127.0.0.1:{srv.getsockname()[1]}"], "does not answer"),
            (["--discipline", "127.0.0.1:9559"], "expected p4:HOST:PORT"),
            (["--discipline", "p4:127.0.0.1:9559", "--plant-opt", "discipline_ports=1,1"], "discipline_ports"),
        ]
        for args, line in cases:
            r = _run(*args)
            assert r.returncode == 2 and line in r.stderr and len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)
    finally:
        srv.close()
    r = _cli("control", "run", "--plant", "netns", "--discipline", "p4:127.0.0.1:9559", "--target", "40M", "--no-api")
    assert r.returncode == 2 and "--discipline: for --plant hardware only" in r.stderr, r.stderr


def test_weights_become_the_programs_fixed_point_parameters() -> None:
    import numpy as np

    from scidmz.disciplines.abc import ABCConfig
    from scidmz.disciplines.ffs import FFSConfig
    from scidmz.plant.hardware_discipline import weight_updates

    abc = ABCConfig(capacity_bps=1e7)
    off = [v - (1 << 32) if v >> 31 else v for v in weight_updates("abc", abc, np.array([7e6, 3e6]))]
    # -log2 R_r plus the constant of abc/p4/gen_tables (Q8): the DTN's R_r is 7/3 of the campus's
    assert (off[1] - off[0]) / 256 == pytest.approx(np.log2(7 / 3), abs=1 / 256)
    ffs = FFSConfig(capacity_bps=1e7, matrix_col_bps=(5e6, 5e6))
    m = weight_updates("ffs", ffs, np.array([14.0, 6.0]))  # rescaled to the capacity, as the stage's
    assert [v / 256 for v in m] == pytest.approx([np.log2(7e6), np.log2(3e6)], abs=1 / 256)
    with pytest.raises(ValueError, match="finite rates > 0"):
        weight_updates("abc", abc, np.array([1e6, 0.0]))


# -- root: the rehearsal -------------------------------------------------------------------------------

def _p4_env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": SRC, "SCIDMZ_RUN_DIR": str(tmp_path / "run")}


def _control(lab: object, tmp_path: Path, policy: str, *extra: str) -> tuple[subprocess.Popen, Path]:
    log = tmp_path / f"{policy}.jsonl"
    p = subprocess.Popen(
        ["ip", "netns", "exec", lab.sw, *CLI, "control", "run", "testbed", "--set", f"link.capacity={LINK:g}",  # type: ignore[attr-defined]
         "--set", f"link.buffer={BUFFER}", "--plant", "hardware", "--policy", policy,
         "--discipline", "p4:127.0.0.1:9559", "--telemetry", f"ebpf:{lab.lan},{lab.wan}",  # type: ignore[attr-defined]
         "--plant-opt", "dtn_prefixes=10.78.1.2/32", "--plant-opt", "remote_prefixes=10.78.1.254/32",
         "--target", f"{TARGET:g}", "--no-api", "--log", str(log), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_p4_env(tmp_path))
    return p, log


def _periods(log: Path) -> list[dict]:
    return [json.loads(x) for x in log.read_text().splitlines() if '"k"' in x] if log.exists() else []


def _wait_periods(p: subprocess.Popen, log: Path, n: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while len(_periods(log)) < n:
        if p.poll() is not None:
            raise AssertionError(p.communicate()[1][-3000:])
        if time.monotonic() > deadline:
            raise AssertionError(f"no {n} periods in {timeout:g} s")
        time.sleep(0.2)


def _switch_entries(lab: object) -> int:
    """Table entries the switch holds in the discipline program's tables (read from inside its namespace,
    with no arbitration: the controller stays the primary client)."""
    code = ("from scidmz.telemetry.p4.p4runtime import P4RuntimeClient\n"
            "from scidmz.telemetry.p4.p4info import P4InfoIndex\n"
            "c=P4RuntimeClient('127.0.0.1:9559')\n"
            "i=P4InfoIndex.from_message(c.get_pipeline().p4info)\nn=0\n"
            "for t in i.tables.values():\n"
            "    if t.name.rpartition('.')[2] in ('port_fwd','agg_of','agg_weight','ing_of','ing_weight'):\n"
            "        e=c.p.Entity(); e.table_entry.table_id=t.id; n+=len(c.read([e]))\n"
            "print(n); c.close()\n")
    out = subprocess.run(["ip", "netns", "exec", lab.sw, sys.executable, "-c", code], capture_output=True,  # type: ignore[attr-defined]
                         text=True, env={**os.environ, "PYTHONPATH": SRC}, timeout=30)
    assert out.returncode == 0, out.stderr[-2000:]
    return int(out.stdout.split()[-1])


def _share(d0: dict, d1: dict) -> tuple[float, float]:
    a, b = (d["end"]["sum_received"]["bits_per_second"] for d in (d0, d1))
    return a / (a + b), a + b


def _p4_share(tmp_path: Path, policy: str) -> tuple[float, float, list[dict]]:
    from scidmz.plant.netns.p4lab import p4_lab

    with p4_lab(f"{P}a") as lab:
        lab.shape(LINK, BUFFER)
        p, log = _control(lab, tmp_path, policy)
        try:
            _wait_periods(p, log, 2)
            assert _switch_entries(lab) == 5  # 2 ports, 1 DTN prefix, 2 weights
            share, total = _share(*lab.flows(2, 2, SECONDS))
            periods = _periods(log)
            if policy == "abc":  # SIGKILL: the entries stay; the next start reclaims them
                p.send_signal(signal.SIGKILL)
                p.wait()
                assert _switch_entries(lab) == 5
                p, log = _control(lab, tmp_path, policy, "--duration", "3")
                _, err = p.communicate(timeout=90)
                assert p.returncode == 0, err[-2000:]
            else:
                p.send_signal(signal.SIGTERM)
                _, err = p.communicate(timeout=60)
                assert p.returncode == 0, err[-2000:]
            # a clean stop: no entry, no owner record; the switch is a wire that still forwards
            assert _switch_entries(lab) == 0
            assert not list((tmp_path / "run" / "claims").glob("p4disc-*.json"))
            assert lab.flows(1, 1, 1)[0]["end"]["sum_received"]["bytes"] > 0
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
    return share, total, periods


def _stage_share(policy: str) -> tuple[float, float]:
    import numpy as np

    from scidmz.plant.netns.nfqlab import nfq_lab
    from scidmz.policies import make_policy
    from scidmz.scenario import load_scenario

    sc = load_scenario("testbed").replace(link={"capacity": LINK, "buffer": BUFFER})
    pol = make_policy(policy)
    cfg = {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(pol.configure(sc)).items()}
    w = pol.weights(sc, np.array([TARGET]))[0]
    d = Path(os.environ.get("TMPDIR", "/tmp")) / f"{P}n-{os.getpid()}"
    d.mkdir(exist_ok=True)
    (d / "w.json").write_text(json.dumps(w.tolist()))
    args = ["--discipline", policy, "--config", json.dumps(cfg), "--link-bps", str(LINK), "--ingress-of",
            json.dumps({"10.77.1.2": 0, "10.77.1.3": 1}), "--weights-file", str(d / "w.json")]
    with nfq_lab(f"{P}n", args, str(d / "stats.json"), LINK, buffer_bytes=BUFFER) as lab:
        d0, d1, _ = lab.tcp_pair(2, 2, SECONDS)
    return _share(d0, d1)


@pytest.fixture(scope="module")
def programs() -> None:
    """Both programs compiled (and cached) before any controller starts: p4c takes ~20 s each here."""
    from scidmz.plant.hardware_discipline import program_files

    for name in ("abc", "ffs"):
        program_files(name)


@pytest.mark.root
@pytest.mark.parametrize("policy", ["abc", "ffs"])
def test_rehearsal_discipline_on_bmv2_follows_the_target_as_the_netns_stage(policy: str, tmp_path: Path,
                                                                           programs: None) -> None:
    share_p4, total_p4, periods = _p4_share(tmp_path, policy)
    share_stage, total_stage = _stage_share(policy)
    gap = share_p4 - share_stage
    # benchmarks/p4_discipline_share.py records this line (docs/deployment.md's table): keep its keys
    print(json.dumps({"policy": policy, "link_bps": LINK, "buffer_bytes": BUFFER, "seconds": SECONDS,
                      "target_share": TARGET / LINK, "dtn_share_bmv2": round(share_p4, 3),
                      "dtn_share_netns_stage": round(share_stage, 3), "gap": round(gap, 3),
                      "goodput_bmv2_bps": round(total_p4), "goodput_stage_bps": round(total_stage)}))
    assert periods and not any(x.get("fallback") for x in periods[1:]), periods[-1]
    # BMv2 carries the link, so the comparison is at a rate it sustains. 2 + 2 flows through the
    # discipline reach 6.9-7.0 Mbit/s on BMv2 on a loaded 2-core CI machine (the stage 6.2-6.8 there);
    # a switch that is the bottleneck would not leave the DTN its weighted share (checked below).
    assert total_p4 > 0.6 * LINK
    assert share_p4 > 0.55  # the weights moved the DTN above an even split of 2 + 2 flows
    assert abs(gap) < 0.15, (share_p4, share_stage)


@pytest.mark.root
def test_entries_no_record_accounts_for_are_refused(tmp_path: Path, programs: None) -> None:
    from scidmz.plant.netns.p4lab import p4_lab

    with p4_lab(f"{P}b") as lab:
        p, log = _control(lab, tmp_path, "abc")
        try:
            _wait_periods(p, log, 1)
            p.send_signal(signal.SIGKILL)
            p.wait()
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        for f in (tmp_path / "run" / "claims").glob("p4disc-*.json"):
            f.unlink()  # the entries stay, nothing says whose they are
        p, _ = _control(lab, tmp_path, "abc", "--duration", "2")
        _, err = p.communicate(timeout=60)
        assert p.returncode == 2 and "already has 5 discipline entries" in err, err[-2000:]
        assert _switch_entries(lab) == 5  # refused: nothing changed


def test_shadow_mode_prints_the_weights_and_touches_no_switch(capsys: pytest.CaptureFixture[str]) -> None:
    import numpy as np

    from scidmz.disciplines.abc import ABCConfig
    from scidmz.plant.hardware_discipline import DisciplinePrinter

    place = DisciplinePrinter("127.0.0.1:1").open()  # nothing answers there: nothing is asked
    place.load(ABCConfig(capacity_bps=1e7))
    place.set_weights(np.array([7e6, 3e6]))
    assert "SHADOW 127.0.0.1:1: abc weights [7.000, 3.000] Mbit/s" in capsys.readouterr().err
    with pytest.raises(ValueError, match="tables are generated for"):
        place.load(ABCConfig(capacity_bps=1e7, memory_meter_s=1.0))


def test_hardware_plant_runs_discipline_policies_only_with_its_discipline_place() -> None:
    from scidmz.plant.hardware import HardwarePlant, HostHardwarePlant
    from scidmz.plant.hardware_discipline import _with_place
    from scidmz.policies.configuration import build_configuration
    from scidmz.runner import check_places

    pol = build_configuration("pacing+abc", {}, lambda _m: {})
    assert set(check_places(_with_place(HostHardwarePlant), pol)) == {"host", "discipline"}
    with pytest.raises(ValueError, match="runs no bottleneck discipline"):
        check_places(HostHardwarePlant, pol)
    with pytest.raises(ValueError, match="cannot pace"):
        check_places(_with_place(HardwarePlant), pol)
