"""`scidmz simulate SCENARIO --policy jenks`: the queue policy through the one runner on the fluid plant."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("jenkspy")

from scidmz.cli import main  # noqa: E402
from scidmz.plant.base import make_plant  # noqa: E402
from scidmz.policies import make_policy  # noqa: E402
from scidmz.runner import Episode  # noqa: E402
from scidmz.scenario import load_scenario  # noqa: E402


def test_jenks_separates_the_dtn_and_serves_its_target_at_the_border_router():
    sc = load_scenario("paper-cubic").replace(duration=30.0)
    pol = make_policy("jenks", queues=4)
    with make_plant("fluid", sc) as pl:
        ep = Episode(pl, pol)
        ep.reset(0)
        ys = np.array([ep.step(400e6)[0].y[0] for _ in range(30)])
        flows = pl.flows()[0]
        cfg = pol.decide(ep.history, np.array([400e6]), pl.flows())[0]
    queue_of = {r.match.src: r.queue for r in cfg.rules}
    dtn_q = {queue_of.get(s, cfg.default) for s, r in zip(flows["src"], flows["role"], strict=True) if r == "dtn"}
    campus_q = {queue_of.get(s, cfg.default) for s, r in zip(flows["src"], flows["role"], strict=True) if r == "campus"}
    assert len(dtn_q) == 1 and not dtn_q & campus_q  # 100 ms DTN streams apart from 10 ms campus flows
    q = cfg.queue(dtn_q.pop())
    assert q.rate == pytest.approx(400e6) and q.ceil == pytest.approx(400e6)
    assert sum(x.rate for x in cfg.queues) <= sc.capacity * (1 + 1e-9)
    assert ys[15:, 0].mean() == pytest.approx(400e6, rel=0.03)  # the DTN at its target
    assert (ys[15:, 0] + ys[15:, 1]).mean() > 0.97 * sc.capacity  # the campus takes the rest


def test_simulate_policy_jenks_cli_and_its_one_line_errors(capsys):
    assert main(["simulate", "small-cubic", "--policy", "jenks", "--set", "policy.queues=2",
                 "--duration", "10", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert doc["policy"] == "jenks" and doc["mean_u"] == pytest.approx(load_scenario("small-cubic").u_max)
    for argv, needle in ((["--policy", "jenks", "--set", "policy.bogus=1"], "unknown option"),
                         (["--policy", "jenks", "--set", "policy.queues=0"], "queues"),
                         (["--policy", "trivial", "--set", "policy.queues=2"], "takes no policy.* options")):
        assert main(["simulate", "small-cubic", "--duration", "5", *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert needle in err and "\n" not in err, err


def test_evaluate_runs_jenks_beside_trivial_on_the_same_paired_trials(tmp_path, capsys):
    assert main(["evaluate", "small-cubic", "--policies", "jenks", "--quick", "--trials", "2",
                 "--experiments", "mrae,utilization", "--tracking-uri", str(tmp_path / "mlruns"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    for exp in ("mrae", "utilization"):
        s = doc["results"][exp]
        assert set(s) >= {"jenks", "trivial"} and s["jenks"]["n"] == s["trivial"]["n"] == 2
    assert "paired_p" in doc["results"]["mrae"]["jenks"] or "reduction_pct" in doc["results"]["mrae"]["jenks"]
    assert main(["evaluate", "small-cubic", "--policies", "mlc", "--quick"]) == 2
    assert "needs --model" in capsys.readouterr().err
    assert main(["evaluate", "small-cubic", "--policies", "red"]) == 2
    assert "unknown policy 'red'" in capsys.readouterr().err
