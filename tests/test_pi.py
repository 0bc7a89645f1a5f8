"""``pi``, the MLC without its model: the same loop, the same GA, the same files (so `mlc` vs `pi` isolates what the inverse ANN adds).

``pi`` must differ from ``mlc`` only by the inverse ANN: with an inverse model that
returns the trivial rate (y_d's campus entry) and the same gains, ``MLCPolicy`` and
``PIPolicy`` decide exactly the same u, period by period, on the fluid plant, with
either limiter. Its gains come from the same GA (``scidmz tune --policy pi``), its
shipped gains are found like the MLC's model, and bad input is one line.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import numpy as np
import pytest

from scidmz.plant.base import make_plant
from scidmz.policies.rate.antiwindup import Gains
from scidmz.policies.rate.mlc import MLCPolicy
from scidmz.policies.rate.pi import PIPolicy, pi_gains_file
from scidmz.runner import run_episode
from scidmz.scenario import load_scenario
from scidmz.state import History

SC = load_scenario("small-cubic")


class TrivialPredictor:
    """An inverse model answering y_d's campus entry B_max - R*_DTN: the MLC with a trivial model."""

    n_features = 22
    per_unit = False

    def __call__(self, X: np.ndarray) -> np.ndarray:
        return X[:, 1]


def _u(policy, targets: np.ndarray, seed: int = 5) -> np.ndarray:
    with make_plant("fluid", SC, batch=targets.shape[1]) as pl:
        traces = run_episode(pl, policy, targets, seed=seed)
    return np.stack([t.column("u") for t in traces])


@pytest.mark.parametrize("limiter", ["band", "rate"])
def test_pi_decides_exactly_as_the_mlc_with_a_trivial_model(limiter: str) -> None:
    from scidmz.tuning.ga import fitness_targets

    gains = [Gains(0.3, 0.5, 1.0, 0.05, limiter), Gains(1.2, 0.1, 0.0, 0.2, limiter),
             Gains(0.0, 2.0, 2.5, 0.02, limiter)]
    tg = fitness_targets(SC, 40.0, seed=1, episodes=3)
    u_pi = _u(PIPolicy(gains), tg)
    u_mlc = _u(MLCPolicy(TrivialPredictor(), gains), tg)
    np.testing.assert_array_equal(u_pi, u_mlc)
    # ... and the loop acts: u leaves the trivial rate B_max - R* (the gains are not all zero).
    assert np.abs(u_pi - (SC.capacity - tg.T)).max() > 1e5


def test_pi_decide_on_a_given_history_equals_the_mlc_and_falls_back_on_nan() -> None:
    g = Gains(0.4, 0.7, 1.1, 0.1)
    h = History(np.array([[0.0, 0.0, 0.1, 0.01, 0.0, 0.0, 0.0]] * 2))
    for rd, u in ((40e6, 50e6), (55e6, 48e6), (47e6, 52e6)):
        h.append(np.array([u, u]), np.array([[rd, 90e6 - rd, 0.12, 0.02, 0.01, 0.01, 18]] * 2), np.array([50e6] * 2))
    a, b = PIPolicy(g), MLCPolicy(TrivialPredictor(), g)
    for p in (a, b):
        p.reset(SC, 2)
    for tgt in (50e6, 30e6, 70e6):
        np.testing.assert_array_equal(a.decide(h, np.array([tgt, tgt])), b.decide(h, np.array([tgt, tgt])))
    np.testing.assert_array_equal(a.pi.integral, b.pi.integral)
    h.append(np.array([50e6, 50e6]), np.array([[np.nan, 0, 0.1, 0.01, 0, 0, 18], [45e6, 0, 0.1, 0.01, 0, 0, 18]]),
             np.array([50e6] * 2))
    with pytest.warns(RuntimeWarning, match="pi: the measured DTN rate gave a non-finite rate"):
        u = a.decide(h, np.array([60e6, 60e6]))
    assert u[0] == SC.capacity - 60e6 and a.fallbacks == 1 and np.isfinite(u[1])


def test_pi_is_registered_and_built_from_a_gains_file(tmp_path) -> None:
    from scidmz.policies.registry import make_policy, policy_kind

    f = Gains(0.1, 0.2, 0.3, 0.05, "rate").save(tmp_path / "g.json")
    pol = make_policy("pi", gains=str(f))
    assert isinstance(pol, PIPolicy) and policy_kind("pi") == "rate"
    assert pol.limiter == "rate" and pol.delta_u_frac == 0.05
    assert make_policy("pi", gains=str(f), delta_u=0.1).delta_u_frac == 0.1
    with pytest.raises(ValueError, match="policy 'pi' needs gains"):
        make_policy("pi")
    with pytest.raises(ValueError, match="delta_u must be a fraction"):
        PIPolicy(Gains(0, 0, 0), delta_u=2.0)


def test_shipped_pi_gains_are_found_and_offered_only_where_made(tmp_path, monkeypatch) -> None:
    from scidmz.datasets import shipped_pi_gains, shipped_pi_gains_names

    monkeypatch.chdir(tmp_path)
    names = shipped_pi_gains_names()
    assert {"paper-cubic-cubic", "paper-bbr2-bbr2", "testbed-cubic", "testbed-bbr"} <= set(names)
    for name in ("paper-cubic", "paper-bbr2", "testbed"):
        sc = load_scenario(name)
        f = shipped_pi_gains(sc)
        info = json.loads(f.read_text())["info"]
        assert info["policy"] == "pi" and info["scenario"] == name and info["cca"] == sc.dtn.cca
        assert pi_gains_file(sc, None) == str(f)
        Gains.load(f)  # a valid gains file
    tb = load_scenario("testbed")
    assert Gains.load(shipped_pi_gains(tb)).delta_u == 0.05  # as the shipped testbed MLC
    assert json.loads(shipped_pi_gains(tb).read_text())["info"]["refine"]["plant"] == "netns"
    # Not offered for another scenario, DTN CCA or buffer regime: one line naming what ships.
    bbr = shipped_pi_gains(tb.replace(dtn={"cca": "bbr"}))  # the kernel BBR v1 DTN's, tuned and refined the same way
    assert bbr.parent.name == "testbed-bbr" and json.loads(bbr.read_text())["info"]["refine"]["plant"] == "netns"
    assert Gains.load(bbr).delta_u == 0.05
    for other in (SC, tb.replace(dtn={"cca": "reno"}), tb.replace(link={"buffer_bdp": 1.0})):
        assert shipped_pi_gains(other) is None
        with pytest.raises(ValueError, match=r"^policy pi needs a gains file .*shipped: .*testbed-cubic[^\n]*$"):
            pi_gains_file(other, None)
    assert pi_gains_file(SC, "given.json") == "given.json"


def test_build_run_resolves_pi_gains_and_refuses_a_model(tmp_path) -> None:
    from scidmz.commands.build import build_run

    run = build_run("testbed", policy="pi")  # the shipped gains
    assert isinstance(run.policy, PIPolicy) and run.policy.delta_u_frac == 0.05
    f = Gains(0.1, 0.2, 0.3).save(tmp_path / "g.json")
    assert build_run("small-cubic", policy="pi", gains=str(f)).policy.gains == Gains(0.1, 0.2, 0.3)
    assert build_run("small-cubic", policy="pi", overrides=[f"policy.gains={f}"]).policy.gains == Gains(0.1, 0.2, 0.3)
    with pytest.raises(ValueError, match="no pi gains ship for 'small-cubic'"):
        build_run("small-cubic", policy="pi")
    with pytest.raises(ValueError, match="policy pi takes no --model"):
        build_run("small-cubic", policy="pi", model="m", gains=str(f))


def test_ga_tunes_pi_without_a_model_and_scores_it_as_the_mlc_with_a_trivial_model() -> None:
    pytest.importorskip("pygad")
    from scidmz.tuning.ga import evaluate_gains, fitness_targets, tune

    tg = fitness_targets(SC, 10.0, seed=0, episodes=2)
    g = np.array([[0.3, 0.5, 1.0], [0.0, 0.0, 0.0]])
    np.testing.assert_array_equal(evaluate_gains(SC, None, g, tg, seed=3, delta_u=0.05),
                                  evaluate_gains(SC, TrivialPredictor(), g, tg, seed=3, delta_u=0.05))
    res = tune(SC, None, generations=2, population=4, parents=2, episode=10.0, delta_u=0.1, limiter="rate")
    assert res.info["policy"] == "pi" and res.info["scenario_fingerprint"]["scenario"] == "small-cubic"
    assert res.gains.delta_u == 0.1 and res.gains.limiter == "rate" and len(res.curve) == 2
    again = tune(SC, None, generations=2, population=4, parents=2, episode=10.0, delta_u=0.1, limiter="rate")
    assert again.gains == res.gains  # seeded


def test_refinement_works_for_pi() -> None:
    from scidmz.tuning.refine import refine_gains

    rr = refine_gains(SC, None, Gains(0.8, 0.9, 1.5, delta_u=0.05), plant="fluid", factors=(1.0, 0.0),
                      episodes=1, episode=10.0)
    assert [r["factor"] for r in rr.rows] == [1.0, 0.0] and rr.factor in (1.0, 0.0)


def _cli(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "scidmz.cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=600)


def test_tune_cli_for_pi_writes_gains_and_bad_input_is_one_line(tmp_path) -> None:
    pytest.importorskip("pygad")
    out = tmp_path / "pi.json"
    r = _cli("tune", "small-cubic", "--policy", "pi", "--out", str(out), "--generations", "1", "--population", "2",
             "--parents", "1", "--episode", "10", "--delta-u", "0.05", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    assert doc["policy"] == "pi" and Gains.load(out).delta_u == 0.05
    info = json.loads(out.read_text())["info"]
    assert info["policy"] == "pi" and info["scenario_fingerprint"]["dtn_cca"] == "cubic"
    for args, msg in ((["--policy", "pi", "--model", "m"], "policy pi takes no --model"),
                      ([], "policy mlc needs --model DIR")):
        r = _cli("tune", "small-cubic", "--out", str(tmp_path / "x.json"), *args, cwd=tmp_path)
        assert r.returncode == 2 and msg in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_simulate_and_evaluate_run_pi(tmp_path) -> None:
    f = Gains(0.3, 0.5, 1.0, 0.05).save(tmp_path / "g.json")
    r = _cli("simulate", "small-cubic", "--policy", "pi", "--gains", str(f), "--duration", "5", "--json",
             cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["policy"] == "pi"
    r = _cli("evaluate", "small-cubic", "--policies", "pi", "--pi-gains", str(f), "--quick", "--trials", "2",
             "--experiments", "mrae", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    assert doc["pi_gains"] == str(f) and {"pi", "trivial"} <= set(doc["results"]["mrae"])
    r = _cli("evaluate", "small-cubic", "--policies", "pi", "--quick", "--trials", "2", "--experiments", "mrae",
             cwd=tmp_path)
    assert r.returncode == 2 and "no pi gains ship for 'small-cubic'" in r.stderr


def _untimed(obj: object) -> object:
    """``obj`` without its wall-clock fields (``*_s``, ``*seconds``), which differ between runs, and with the
    GA's best fitness to 12 digits (summed in another order over worker processes)."""
    if isinstance(obj, dict):
        return {k: float(f"{v:.12g}") if k == "best_iae" else _untimed(v) for k, v in obj.items()
                if not (k.endswith("seconds") or k == "wall_s")}
    if isinstance(obj, list):
        return [_untimed(v) for v in obj]
    return obj


def test_saturator_benchmark_runs_and_refuses_bad_input(tmp_path) -> None:
    """benchmarks/pi_vs_mlc_saturator.py at smoke sizes (the shipped testbed model standing in for a
    paper-scale one), and its one-line refusals."""
    pytest.importorskip("pygad")
    from pathlib import Path

    from scidmz.datasets import shipped_model

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "pi_vs_mlc_saturator.py"
    (tmp_path / "repro" / "cubic").mkdir(parents=True)
    (tmp_path / "repro" / "cubic" / "model").symlink_to(shipped_model(load_scenario("testbed"))[0])
    out = tmp_path / "sat.json"
    small = ["--from", str(tmp_path / "repro"), "--cca", "cubic", "--quick", "--generations", "1", "--population",
             "2", "--bands", "0.05", "--rate-bands", "0.1", "--work", str(tmp_path / "work"), "--ga-seeds", "2"]
    r = subprocess.run([sys.executable, str(script), *small, "--trials", "2", "--out", str(out)], capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    assert doc == json.loads(out.read_text())
    # --work: a re-run reuses every finished configuration and gives the same results; another plan is refused.
    (tmp_path / "work" / "cubic-rate-0.1-select.json").unlink()  # as if interrupted during the last configuration
    r = subprocess.run([sys.executable, str(script), *small, "--trials", "2", "--workers", "2"], capture_output=True,
                       text=True, timeout=900)  # the GA over two processes gives the same gains
    assert r.returncode == 0, r.stderr
    assert "cubic-trivial: reused" in r.stderr and "cubic-band-0.05-select: reused" in r.stderr
    assert "cubic-rate-0.1-select: reused" not in r.stderr
    assert _untimed(json.loads(r.stdout.strip().splitlines()[-1])["results"]) == _untimed(doc["results"])
    r = subprocess.run([sys.executable, str(script), *small, "--trials", "3"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2 and "holds a run with another plan" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    # report.md beside --out, rendered from it alone; --render-only rewrites the same text.
    report = (tmp_path / "report.md").read_text()
    assert "Smoke-test sizes" in report and "| band | 0.05 |" in report and "| rate | 0.1 |" in report
    assert "At each policy's best saturator the inverse ANN" in report
    (tmp_path / "report.md").unlink()
    r = subprocess.run([sys.executable, str(script), "--render-only", str(out)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and (tmp_path / "report.md").read_text() == report, r.stderr
    r = subprocess.run([sys.executable, str(script), "--render-only", str(tmp_path / "work" / "identity.json")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "not a pi_vs_mlc_saturator results file" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    res = doc["results"]["cubic"]
    assert [(c["limiter"], c["delta_u"]) for c in res["configs"]] == [("band", 0.05), ("rate", 0.1)]
    for c in res["configs"]:
        assert c["mlc"]["gains"] and c["pi"]["mrae"] > 0 and c["mlc_vs_pi"]["mrae"]["n"] == 2
    assert {"mlc", "pi", "mlc_vs_pi", "trade_off", "ga_spread"} <= set(res["best"])
    # selected on the selection trials (seeds 2, 3: just past the evaluation's 0, 1), judged on the evaluation's
    assert doc["plan"]["selection"] == {"seed": 2, "trials": 2} and doc["plan"]["ga_seeds"] == 2
    for name in ("mlc", "pi"):
        b = res["best"][name]
        assert len(b["mrae_by_ga_seed"]) == 2 and b["mrae"] == b["mrae_by_ga_seed"][0]
        assert b["ga_spread"] == max(b["mrae_by_ga_seed"]) - min(b["mrae_by_ga_seed"])
        assert b["selection_mrae"] == min(c[name]["mrae"] for c in res["configs"])
    assert "Produced under the old rule" not in report and "Mean MRAE on the evaluation trials across GA seeds" in report
    # Without --from, the paper-scale models shipped for paper-cubic and paper-bbr2.
    mod = _saturator_module()
    a, _, ccas = mod._args([])
    assert ccas == ["cubic", "bbr2"] and a.src is None
    for cca, name in (("cubic", "paper-cubic"), ("bbr2", "paper-bbr2")):
        assert mod._model(None, cca) == shipped_model(load_scenario(name))[0]
    for args, msg in ((["--from", str(tmp_path)], "no inverse model at"),
                      (["--from", str(tmp_path / "repro"), "--cca", "cubic", "--bands", "2"], "(0, 1]"),
                      (["--from", str(tmp_path / "repro"), "--cca", "reno"], "--cca must be among"),
                      (["--from", str(tmp_path / "repro"), "--cca", "cubic", "--trials", "1"], ">= 2"),
                      # selection on (some of) the trials it is judged on: refused before any work
                      (["--from", str(tmp_path / "repro"), "--cca", "cubic", "--trials", "4", "--select-seed", "3"],
                       "the selection seeds [3, 7) overlap the evaluation seeds [0, 4) at seed 3"),
                      # an --out it could not write: refused before any work (it once finished 70 min into it)
                      (["--from", str(tmp_path / "repro"), "--cca", "cubic", "--work", str(tmp_path / "w2"),
                        "--out", str(tmp_path / "absent" / "results.json")], "directory " + str(tmp_path / "absent"))):
        r = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and msg in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "w2").exists()


def test_saturator_work_dir_takes_a_later_cca_and_refuses_another_model(tmp_path) -> None:
    """A study run one CCA at a time (--cca cubic, later --cca bbr2) shares one --work directory."""
    mod = _saturator_module()
    ident = {"plan": {"trials": 50}, "code": "c0", "models": {"cubic": {"weights": "a"}}}
    mod._open_work(tmp_path, ident)
    mod._open_work(tmp_path, {**ident, "models": {"bbr2": {"weights": "b"}}})
    assert json.loads((tmp_path / "identity.json").read_text())["models"] == {"cubic": {"weights": "a"},
                                                                            "bbr2": {"weights": "b"}}
    for other, what in (({**ident, "models": {"cubic": {"weights": "x"}}}, "another model for cubic"),
                        ({**ident, "code": "c1"}, "another code"), ({**ident, "plan": {"trials": 9}}, "another plan")):
        with pytest.raises(ValueError, match=what):
            mod._open_work(tmp_path, other)


def test_saturator_verdict_names_which_policy_wins_only_when_significant() -> None:
    """The report's sentence on the ANN: no difference unless p < 0.05, then the side with the lower MRAE."""
    from scidmz.evaluation.verdict import saturator_verdict

    def best(diff: float, p: float) -> dict:
        return {"mlc_vs_pi": {"mrae": {"n": 50, "mean_diff": diff, "mlc_lower": 30, "pi_lower": 20, "wilcoxon_p": p}}}

    assert "no significant difference" in saturator_verdict(best(-0.01, 0.2))
    wins = saturator_verdict(best(-0.01, 0.01), spread=0.001)
    assert "pays for itself" in wins and "by 0.0100" in wins
    assert "does not pay for itself" in saturator_verdict(best(0.002, 0.01), spread=0.001)
    assert "no significant difference" in saturator_verdict(best(0.002, float("nan")))
    # with the spread across GA seeds not measured, no difference is a finding, whatever its p
    unknown = saturator_verdict(best(-0.01, 0.001))
    assert "not measured: not a finding" in unknown and "pays for itself" not in unknown
    # a difference smaller than one configuration's spread across GA seeds is never a finding
    small = saturator_verdict(best(-0.001, 0.01), spread=0.0019)
    assert "not a finding" in small and "pays for itself" not in small and "(0.0019)" in small
    assert "pays for itself" in saturator_verdict({**best(-0.01, 0.01), "ga_spread": 0.0019})


def test_tuning_and_selection_seeds_must_be_apart_from_the_evaluation_seeds() -> None:
    from scidmz.evaluation.leaderboard.plan import check_tuning_apart, seed_block

    check_tuning_apart(seed_block(0, 50), selection=seed_block(50, 50), GA=seed_block(1_000_000, 5))
    with pytest.raises(ValueError, match=r"the GA seeds \[40, 45\) overlap the evaluation seeds \[0, 50\) at seed 40"):
        check_tuning_apart(seed_block(0, 50), selection=seed_block(50, 5), GA=seed_block(40, 5))
    check_tuning_apart(seed_block(0, 0), selection=seed_block(0, 5))  # no evaluation trials: nothing to overlap


def _saturator_module():
    """benchmarks/pi_vs_mlc_saturator.py imported as a module (it is a script, not in the package)."""
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "pi_vs_mlc_saturator.py"
    spec = importlib.util.spec_from_file_location("pi_vs_mlc_saturator", script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_leaderboard_refuses_gains_tuned_on_its_own_trial_seeds(tmp_path, capsys) -> None:
    """A plan whose trials run on the seeds the given gains were tuned on: one line, exit 2, nothing written."""
    from pathlib import Path

    from scidmz.cli import main
    from scidmz.evaluation.leaderboard.run import tuning_seeds

    gains = Path(__file__).resolve().parents[1] / "reports" / "leaderboard" / "pi-gains" / "testbed" / "gains.json"
    assert tuning_seeds(gains) == {"GA": range(1_000_000, 1_000_001), "refinement": range(2_000_000, 2_000_002)}
    assert tuning_seeds(tmp_path / "absent.json") == {}
    out = tmp_path / "run"
    code = main(["leaderboard", "testbed", "--policies", "trivial,pi", "--pi-gains", str(gains), "--quick",
                 "--trials", "2", "--experiments", "mrae", "--seed", "1999999", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and not out.exists()
    assert len(err) == 1 and ("the pi gains' refinement seeds [2000000, 2000002) overlap the evaluation seeds "
                              "[1999999, 2000001) at seed 2000000") in err[0]
