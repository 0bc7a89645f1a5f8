"""Self-describing results files, the report renderer and the runner's per-period hook."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from scidmz.evaluation.results import (
    FORMAT_VERSION,
    current_meta,
    note_run,
    provenance,
    read_results,
    write_json,
)
from scidmz.scenario import load_scenario


def test_provenance_records_the_scenarios_and_models_run_inside() -> None:
    from scidmz.plant.fluid.plant import model_fingerprint

    sc = load_scenario("small-cubic")
    note_run(sc, "fluid")  # outside any record: nothing happens
    with provenance("scidmz reproduce test") as prov:
        note_run(sc, "fluid")
        with provenance("ignored inner command") as inner:
            assert inner is prov  # one run, one record
            note_run(sc.replace(name="other"), "netns")
        meta = current_meta(extra=1)
    assert meta["format_version"] == FORMAT_VERSION and meta["command"] == "scidmz reproduce test"
    from scidmz import __version__

    assert meta["scidmz_version"] == __version__ and meta["extra"] == 1
    assert meta["git_commit"] and meta["machine"]["cpus"] >= 1 and meta["machine"]["arch"]
    assert meta["load_avg"] is None or len(meta["load_avg"]) == 3
    assert meta["scenarios"]["small-cubic"]["regime"] == "shallow" and set(meta["scenarios"]) == {"small-cubic", "other"}
    assert meta["plant_models"] == {"fluid": model_fingerprint()}  # the netns plant has no model
    assert "scenarios" in current_meta() and current_meta()["scenarios"] == {}


def test_results_json_is_strict_and_read_back_with_one_line_errors(tmp_path: Path) -> None:
    p = write_json({"a": math.nan, "b": [np.float64(1.5), np.int64(2), math.inf], "c": (True,)}, tmp_path / "r.json")
    text = p.read_text()
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text) == {"a": None, "b": [1.5, 2, None], "c": [True]}
    assert read_results(p)["b"][1] == 2
    with pytest.raises(FileNotFoundError, match="run `scidmz reproduce x` first"):
        read_results(tmp_path / "missing.json", "scidmz reproduce x")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="not a readable results file"):
        read_results(tmp_path / "bad.json")
    (tmp_path / "new.json").write_text(json.dumps({"meta": {"format_version": FORMAT_VERSION + 1}}))
    with pytest.raises(ValueError, match="newer than this scidmz reads"):
        read_results(tmp_path / "new.json")


def test_trace_parquet_carries_format_and_package_version(tmp_path: Path) -> None:
    from scidmz import __version__
    from scidmz.state import TRACE_FORMAT_VERSION, Trace

    tr = Trace.from_arrays(np.arange(3.0), np.zeros((3, 7)), np.ones(3), np.ones(3), meta={"policy": "x"})
    back = Trace.read_parquet(tr.to_parquet(tmp_path / "t.parquet"))
    assert back.meta["format_version"] == TRACE_FORMAT_VERSION and back.meta["scidmz_version"] == __version__
    assert back.meta["policy"] == "x" and "format_version" not in tr.meta  # the trace itself is not changed


def test_run_experiments_writes_a_self_describing_results_file(tmp_path: Path) -> None:
    from scidmz.evaluation.mlc.experiments import ExperimentPlan, run_experiments
    from scidmz.plant.fluid.plant import model_fingerprint
    from scidmz.policies import TrivialPolicy

    plan = ExperimentPlan(trials=2, duration=5.0, target_hold=5.0, seed=1)
    run_experiments(load_scenario("small-cubic"), {"trivial": TrivialPolicy()}, plan, ["mrae"], out_dir=tmp_path)
    meta = json.loads((tmp_path / "results.json").read_text())["meta"]
    assert meta["format_version"] == FORMAT_VERSION and meta["plant_models"]["fluid"] == model_fingerprint()
    assert meta["scenarios"]["small-cubic"]["dtn_cca"] == "cubic"


def test_run_episode_on_period_sees_every_period_and_can_stop_it() -> None:
    from scidmz.plant.base import make_plant
    from scidmz.policies import TrivialPolicy
    from scidmz.runner import run_episode

    seen: list[int] = []

    def look(k: int, plant) -> bool:
        seen.append(k)
        assert plant.info["dtn_bytes"].shape == (1,)
        return k == 3

    with make_plant("fluid", load_scenario("small-cubic")) as p:
        traces = run_episode(p, TrivialPolicy(), np.full(10, 50e6), seed=0, on_period=look)
    assert seen == [0, 1, 2, 3] and len(traces[0]) == 4


def test_render_helpers_turn_missing_values_into_na() -> None:
    from scidmz.evaluation.render import fmt_num

    assert fmt_num(None) == fmt_num(math.nan) == fmt_num(math.inf) == "n/a"
    assert fmt_num(0.12345) == "0.123" and fmt_num(3, "{:+.1f} %") == "+3.0 %"
