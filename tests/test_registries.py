"""The registries are the only lists: a policy with trained files and a real-time plant are added by
their own module and one registry line each, and every command runs them; no plant or policy name is
compared as a string outside its registry and its own package."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from scidmz.cli import main
from scidmz.plant import registry as plants
from scidmz.plant.fluid.plant import FluidPlant
from scidmz.policies import registry as policies

SRC = Path(__file__).resolve().parent.parent / "src" / "scidmz"


# -- the toy policy (a rate policy that runs from a trained file) and the toy real-time plant ---------

class MarginPolicy:
    """u = B_max - (1 + margin) R*_DTN, the margin read from a trained JSON file."""

    name = "toymargin"
    kind = "rate"

    def __init__(self, weights: str, scale: float = 1.0) -> None:
        self.weights, self.scale = weights, scale
        self.margin = float(json.loads(Path(weights).read_text())["margin"]) * scale

    def reset(self, scenario, batch: int = 1) -> None:
        self.scenario_ = scenario

    def decide(self, history, target):
        s = self.scenario_
        return np.clip(s.link.capacity - (1.0 + self.margin) * np.asarray(target, dtype=np.float64), s.u_min, s.u_max)


def margin_files(scenario, *, weights: str | None = None) -> dict[str, str]:
    """The toy's trained file: given, or one line (none ships)."""
    if weights is None:
        raise ValueError("policy toymargin needs --weights FILE (no weights ship for it)")
    if not Path(weights).is_file():
        raise FileNotFoundError(f"weights file not found: {weights}")
    json.loads(Path(weights).read_text())["margin"]  # unreadable weights: one line before any plant
    return {"weights": str(weights)}


class OneAtATimePlant(FluidPlant):
    """The fluid model held to one instance, as a real-time plant is, with a flag of its own."""

    def __init__(self, scenario, telemetry: str = "sim", dt: float | None = None) -> None:
        if telemetry != "sim":
            raise ValueError(f"--telemetry: the toyrt plant knows only 'sim', got {telemetry!r}")
        super().__init__(scenario, batch=1, dt=dt)


@pytest.fixture()
def toys(monkeypatch, tmp_path: Path) -> Path:
    """The two registry lines (on copies of the registries, so nothing outlives the test); the weights file."""
    for name in plants.plant_names():
        plants.plant_entry(name)  # every built-in registered before the copy
    for name in policies.policy_names():
        policies.policy_options(name)
    monkeypatch.setattr(policies, "_REGISTRY", dict(policies._REGISTRY))
    monkeypatch.setattr(plants, "_REGISTRY", dict(plants._REGISTRY))
    policies.register_policy("toymargin", "rate", MarginPolicy, files=margin_files)
    plants.register_plant("toyrt", OneAtATimePlant, realtime=True, cli=("telemetry",))
    monkeypatch.chdir(tmp_path)
    weights = tmp_path / "weights.json"
    weights.write_text(json.dumps({"margin": 0.1}))
    return weights


def _last_json(capsys) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_the_registries_declare_files_options_and_real_time(toys: Path) -> None:
    assert policies.policy_files("toymargin") == ("weights",)
    assert policies.policy_file_flags()["toymargin_weights"] == ("toymargin", "weights")
    assert "toymargin" in policies.ranked_policies() and "none" not in policies.ranked_policies()
    assert policies.policy_files("mlc") == ("model", "gains") and policies.policy_files("pi") == ("gains",)
    spec = plants.plant_spec("toyrt", {"telemetry": "sim"})
    assert spec.realtime and spec.max_batch == 1 and plants.plant_entry("toyrt").cli == ("telemetry",)
    assert not plants.plant_spec("fluid").realtime and plants.plant_entry("netns").realtime
    with pytest.raises(ValueError, match="has no option 'bogus'"):
        plants.plant_spec("toyrt", {"bogus": 1})
    with pytest.raises(ValueError, match="toymargin's files .* or ranking differ|is not an option"):
        policies.register_policy("toyother", "rate", MarginPolicy, files=lambda sc, *, model=None: {})


def test_the_assembly_builds_the_run_once(toys: Path) -> None:
    from scidmz.commands.build import build_run, plant_choice

    spec = plant_choice("toyrt", telemetry="sim")
    run = build_run("small-cubic", policy="toymargin", plant=spec, overrides=[f"policy.weights={toys}"],
                    duration="5s")
    assert run.plant is spec and run.policy.margin == pytest.approx(0.1)
    with run.make_plant() as pl:
        assert pl.batch == 1
    with pytest.raises(ValueError, match="supports batch<=1"):
        run.make_plant(batch=2)
    with pytest.raises(ValueError, match="toymargin needs --weights"):
        build_run("small-cubic", policy="toymargin")
    with pytest.raises(ValueError, match="policy trivial takes no --gains"):
        build_run("small-cubic", policy="trivial", gains=str(toys))
    with pytest.raises(ValueError, match="--dev: for --plant hardware only"):
        plant_choice("toyrt", dev="eth0")


def test_simulate_runs_them(toys: Path, capsys) -> None:
    assert main(["simulate", "small-cubic", "--policy", "toymargin", "--set", f"policy.weights={toys}",
                 "--plant", "toyrt", "--telemetry", "sim", "--duration", "10", "--json"]) == 0
    doc = _last_json(capsys)
    assert doc["plant"] == "toyrt" and doc["policy"] == "toymargin" and doc["mean_u"] > 0
    assert main(["simulate", "small-cubic", "--policy", "toymargin", "--plant", "toyrt"]) == 2
    assert "toymargin needs --weights" in capsys.readouterr().err


def test_control_run_runs_them(toys: Path, tmp_path: Path, capsys) -> None:
    log = tmp_path / "control.jsonl"
    assert main(["control", "run", "small-cubic", "--policy", "toymargin", "--set", f"policy.weights={toys}",
                 "--plant", "toyrt", "--telemetry", "sim", "--target", "5M", "--duration", "2s", "--no-api",
                 "--log", str(log)]) == 0
    rows = [json.loads(ln) for ln in log.read_text().splitlines() if ln.strip()]
    assert rows[0]["event"] == "start" and rows[0]["policy"] == "toymargin" and rows[0]["mode"] == "live"
    assert any("u" in r and r.get("k", 0) >= 1 for r in rows) and rows[-1]["reason"] == "duration reached"


def test_evaluate_runs_them_one_trial_at_a_time(toys: Path, tmp_path: Path, capsys) -> None:
    args = ["evaluate", "small-cubic", "--policies", "toymargin", "--toymargin-weights", str(toys),
            "--plant", "toyrt", "--quick", "--trials", "2", "--experiments", "mrae",
            "--tracking-uri", str(tmp_path / "mlruns"), "--json"]
    assert main(args) == 0
    doc = _last_json(capsys)
    assert doc["toymargin_weights"] == str(toys) and {"toymargin", "trivial"} <= set(doc["results"]["mrae"])
    assert main([*args, "--executor", "processes:2"]) == 2  # a real-time plant runs its trials in turn
    assert "runs in real time" in capsys.readouterr().err


def test_the_leaderboard_runs_them(toys: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "lb"
    assert main(["leaderboard", "small-cubic", "--plant", "toyrt", "--policies", "toymargin",
                 "--toymargin-weights", str(toys), "--quick", "--trials", "2", "--experiments", "mrae",
                 "--out", str(out), "--tracking-uri", str(tmp_path / "mlruns"), "--json"]) == 0
    doc = json.loads((out / "results.json").read_text())
    assert doc["plant"] == "toyrt" and {r["policy"] for r in doc["rows"]} == {"toymargin", "trivial"}
    assert main(["leaderboard", "small-cubic", "--plant", "toyrt", "--policies", "toymargin",
                 "--quick", "--out", str(tmp_path / "lb2")]) == 2
    assert "toymargin needs --toymargin-weights" in capsys.readouterr().err


# -- no plant or policy name compared as a string outside its registry and its own package -----------

#: Where a plant's or a policy's name may be compared: its registry and the plants' / policies' own packages.
_OWN = {"plant": "plant/", "policy": "policies/"}
#: Lines that compare a string equal to a part's name but meaning something else, each with why.
_NOT_A_PART = {
    "commands/reproduce.py": r"\bpaper\b",  # the papers reproduced (mlc, jenks, abc, ffs), not policies
    "evaluation/disciplines/reproduce.py": r"\bpaper\b",  # the same papers
    "conformance.py": r"\.columns",  # the trace's "pacing" column
    # The leaderboard's verdict and ranking plot answer the study's named questions (is the trivial
    # baseline best, does mlc beat pi, does pacing beat shaping): the names are that question's data.
    "evaluation/verdict.py": r'\["policy"\] == "(trivial|mlc|pi|pacing)"',
    "plots.py": r'\["policy"\] == "trivial"',
}


def _compared(names: tuple[str, ...]) -> re.Pattern[str]:
    """A line comparing a string literal that is one of ``names`` (==, !=, in, not in, either side)."""
    alt = "|".join(map(re.escape, names))
    return re.compile(rf"""(==|!=)\s*["']({alt})["']|["']({alt})["']\s*(==|!=|\bin\b|\bnot in\b)""")


def test_no_part_name_is_compared_outside_its_registry_and_package() -> None:
    families = {"plant": _compared(plants.plant_names()), "policy": _compared(policies.policy_names())}
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        for i, line in enumerate(path.read_text().splitlines(), 1):
            for family, compared in families.items():
                if rel.startswith(_OWN[family]) or not compared.search(line):
                    continue
                if not re.search(_NOT_A_PART.get(rel, r"(?!)"), line):
                    found.append(f"{rel}:{i}: {line.strip()}")
    assert not found, "a part's name compared outside its registry:\n" + "\n".join(found)


def test_the_name_grep_finds_a_comparison() -> None:
    compared = _compared((*plants.plant_names(), *policies.policy_names()))
    assert compared.search('if plant == "fluid":') and compared.search("if 'netns' in res:")
    assert compared.search('if a.policy != "mlc":') and not compared.search('make_plant("fluid", sc)')
