"""Options a command does not use are refused, not ignored: a table over every command and option.

``guard.options.declare_option_rules`` makes a command with modes declare, for every option, when it
applies; ``check_args`` refuses, with one line naming it, an option given where it would do nothing.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from scidmz.cli import build_parser, main
from scidmz.guard.options import check_option_rules

GAINS = Path(__file__).resolve().parent.parent / "src/scidmz/datasets/models/testbed-cubic/pi_gains.json"


def _commands() -> dict[str, argparse.ArgumentParser]:
    """Every (sub)command's parser by its command line: {"reproduce": ..., "control run": ...}."""
    out: dict[str, argparse.ArgumentParser] = {}

    def walk(p: argparse.ArgumentParser, name: str) -> None:
        subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs and name:
            out[name] = p
        for a in subs:
            for key, sp in a.choices.items():
                walk(sp, f"{name} {key}".strip())

    walk(build_parser(), "")
    return out


COMMANDS = _commands()
#: Options that switch a command's mode: a command with one of these uses different options in
#: different modes, so it must declare its rules.
MODE_OPTIONS = {"render_only", "merge", "paper", "policies"}


def _dests(p: argparse.ArgumentParser) -> set[str]:
    return {a.dest for a in p._actions} - {"help", "mkdir"}


def test_every_command_with_modes_declares_when_each_option_applies() -> None:
    undeclared = [name for name, p in COMMANDS.items()
                  if _dests(p) & MODE_OPTIONS and p.get_default("option_rules") is None]
    assert not undeclared, f"commands with modes but no option rules: {undeclared}"
    declared = [name for name, p in COMMANDS.items() if p.get_default("option_rules") is not None]
    assert {"reproduce", "leaderboard", "evaluate"} <= set(declared)
    for name in declared:
        rules, _ = COMMANDS[name].get_default("option_rules")
        assert set(rules) == _dests(COMMANDS[name]) - {"func", "prepare", "option_rules"}, name


def _sample(action: argparse.Action) -> list[str]:
    """The option given with a value other than its default."""
    flag = action.option_strings[0]
    if action.nargs == 0:
        return [flag]
    if action.choices:
        return [flag, next(str(c) for c in action.choices if c != action.default)]
    if action.type is int:
        return [flag, "3"]
    if action.type is float:
        return [flag, "0.5"]
    if flag.endswith("-gains"):
        return [flag, str(GAINS)]
    return [flag, "mrae" if "experiments" in flag else "trivial" if "polic" in flag else "x"]


#: (command, base argv) contexts, and the options each accepts there: every other option is refused.
MODES = [
    (["leaderboard", "--merge", "--out", "o"], {"out", "json", "merge"}),
    (["leaderboard", "--render-only", "--out", "o"], {"out", "json", "render_only"}),
]


@pytest.mark.parametrize("base, allowed", MODES, ids=lambda x: " ".join(x) if isinstance(x, list) else "")
def test_a_mode_that_runs_nothing_refuses_every_option_of_a_run(base: list[str], allowed: set[str]) -> None:
    p = COMMANDS[base[0]]
    checked = 0
    for action in p._actions:
        if not action.option_strings or action.dest in allowed or action.dest in ("help", "mkdir"):
            continue
        args = build_parser().parse_args([*base, *_sample(action)])
        with pytest.raises(ValueError, match=action.option_strings[0].replace("-", r"\-")):
            check_option_rules(args)
        checked += 1
    assert checked > 10


def _paper_options(paper: str, render_only: bool) -> set[str]:
    """What reproduce PAPER uses, stated here independently of the command's own table."""
    sizes = {"identify_duration", "epochs", "cv_folds", "generations", "population", "episode", "trials",
             "fct_trials", "ns", "ns_trials", "ns_max_flows", "short_trials", "experiments"}
    every = {"paper", "quick", "out", "notes", "render_only", "json"}
    run = {"mlc": {"seed", "tracking_uri", "resume", "cca", "evaluation_from", "executor", *sizes}, "jenks": set(),
           "abc": {"seed"},
           "ffs": {"seed"}, "disciplines-dmz": {"seed", "trials", "tracking_uri"}}[paper]
    always = {"mlc": {"plant"}, "jenks": {"netns", "keep_netns"}, "abc": {"netns", "keep_netns"},
              "ffs": {"netns", "keep_netns"}, "disciplines-dmz": set()}[paper]
    return every | always | (set() if render_only else run)


@pytest.mark.parametrize("render_only", [False, True])
@pytest.mark.parametrize("paper", ["mlc", "jenks", "abc", "ffs", "disciplines-dmz"])
def test_reproduce_table_every_paper_by_every_option(paper: str, render_only: bool) -> None:
    base = ["reproduce", paper, "--out", "o", *(["--render-only"] if render_only else [])]
    uses = _paper_options(paper, render_only)
    for action in COMMANDS["reproduce"]._actions:
        if not action.option_strings or action.dest in ("help", "mkdir", "render_only"):
            continue
        args = build_parser().parse_args([*base, *_sample(action)])
        if action.dest in uses:
            check_option_rules(args)
        else:
            with pytest.raises(ValueError, match=action.option_strings[0]):
                check_option_rules(args)


@pytest.mark.parametrize("command", ["evaluate", "leaderboard"])
def test_a_policy_file_flag_goes_with_its_policy(command: str) -> None:
    from scidmz.policies.registry import policy_file_flags

    for dest, (name, _) in policy_file_flags().items():
        flag = "--" + dest.replace("_", "-")
        other = "trivial,abc" if name != "abc" else "trivial"
        base = [command, "small-cubic", "--out", "o"]
        refused = build_parser().parse_args([*base, "--policies", other, flag, str(GAINS)])
        with pytest.raises(ValueError, match=f"{flag} goes with --policies including {name}"):
            check_option_rules(refused)
        check_option_rules(build_parser().parse_args([*base, "--policies", f"trivial,{name}", flag, str(GAINS)]))


@pytest.mark.parametrize("argv, says", [
    (["evaluate", "testbed", "--policies", "trivial", "--pi-gains", str(GAINS), "--quick"], "--pi-gains goes with"),
    (["leaderboard", "testbed", "--policies", "pacing", "--pi-gains", str(GAINS), "--out", "lb"], "--pi-gains goes"),
    (["leaderboard", "--merge", "--render-only", "--out", "lb"], "--render-only does nothing with --merge"),
    (["leaderboard", "small-cubic", "--experiments", "", "--out", "lb"], "no experiment named"),
    (["leaderboard", "small-cubic", "--experiments", " , ", "--out", "lb"], "no experiment named"),
    (["evaluate", "small-cubic", "--experiments", "", "--out", "lb"], "no experiment named"),
    (["reproduce", "mlc", "--quick", "--experiments", "", "--out", "lb"], "no experiment named"),
    (["reproduce", "mlc", "--render-only", "--trials", "3", "--out", "lb"], "--trials does nothing with --render"),
    (["reproduce", "mlc", "--quick", "--executor", "threads", "--out", "lb"], "--executor must be local"),
    (["reproduce", "mlc", "--render-only", "--executor", "local", "--out", "lb"], "--executor does nothing with"),
    (["reproduce", "jenks", "--executor", "processes:2", "--out", "lb"], "--executor goes with reproduce mlc"),
    (["leaderboard", "small-cubic", "--plant", "hardware", "--quick", "--out", "lb"], "plays no scenario"),
    (["leaderboard", "small-cubic", "--experiments", "mrae", "--fct-trials", "3", "--out", "lb"],
     "--fct-trials sizes the fct and utilization experiments"),
    (["reproduce", "mlc", "--experiments", "mrae", "--ns", "1,10", "--out", "lb"], "--ns sizes the sweep"),
    (["reproduce", "mlc", "--plant", "netns", "--short-trials", "3", "--out", "lb"], "--short-trials sizes the short"),
    (["simulate", "testbed", "--policy", "pacing", "--gains", str(GAINS)], "policy pacing takes no --gains"),
])
def test_the_probes_are_refused_with_one_line(argv: list[str], says: str, tmp_path: Path, capsys,
                                              monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and says in err, err
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_the_plant_registry_declares_which_plants_replay_a_scenario() -> None:
    from scidmz.plant.registry import plant_entry, plant_names

    replays = {n: plant_entry(n).replays for n in plant_names()}
    assert replays["fluid"] and replays["netns"] and not replays["hardware"]
