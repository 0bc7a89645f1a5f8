"""Every count and size scidmz accepts, with its bounds: one table, checked before any allocation.

A count without an upper bound is a way to exhaust the machine: ``evaluate
--trials 1000000000`` reached 15 GB in 30 s before this table existed. Each
``Bound`` below names what it counts, its lowest and highest accepted value,
and why that bound (the paper's value where there is one; ours otherwise,
chosen far outside what anyone runs and inside what a 2-core, 24 GB machine
survives). :func:`check` refuses a value outside its bound with one line
naming the option (a ``ValueError``: the CLI answers exit 2), and is called

* at the CLI edge, before any work: ``guard.counts.COUNTS`` declares which
  option of which command is which bound;
* by the library's own planners (``TunePlan``, ``ExperimentPlan``,
  ``ReproducePlan``, ``identify``, ``train``, the scenario loader, the
  daemon's client), so a caller that is not the CLI gets the same answers.

docs/safety.md lists this table; ``tests/test_hardening_limits.py`` checks
the two agree, and that the largest allowed value plus one is refused
everywhere.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

__all__ = ["Bound", "BOUNDS", "check", "check_depth", "depth", "MAX_BATCH_FLOWS", "MAX_DEPTH",
           "MAX_SCENARIO_BYTES", "MAX_TEXT_BYTES", "MAX_TOKEN_BYTES", "MAX_RESPONSE_BYTES", "MAX_NAME",
           "MAX_STEPS", "MIN_DATASET_ROWS", "DATASET_RANGES", "MAX_KEY_CHARS", "MAX_KEYS", "MAX_KEY_DOTS",
           "MAX_LEDGER_BYTES", "MAX_TRIAL_CELLS", "MAX_TRIAL_SECONDS"]


@dataclass(frozen=True)
class Bound:
    """``lo <= value <= hi`` (``zero_ok``: 0 is also accepted, meaning "off")."""

    lo: float
    hi: float
    what: str
    why: str
    zero_ok: bool = False

    def describe(self) -> str:
        """``">= 1 and <= 10_000"`` (``"0, or >= 2 and <= 100"`` when 0 is accepted)."""
        rng = f">= {_num(self.lo)} and <= {_num(self.hi)}"
        return f"0, or {rng}" if self.zero_ok else rng


def _num(x: float) -> str:
    return f"{int(x):,}".replace(",", "_") if float(x).is_integer() and abs(x) < 1e15 else f"{x:g}"


#: Periods in one episode or one identification (duration / period), as ``scenario.MAX_STEPS``.
MAX_STEPS = 10_000_000
#: Plant instances x flows per instance in one batched fluid plant (ours: it bounds the plant's
#: memory, which grows linearly with it; the paper's sweep stays below it through ``ns_max_flows``).
MAX_BATCH_FLOWS = 2_000_000
#: Nesting depth of every TOML or JSON document scidmz reads (ours: the deepest real one, a
#: reproduction's results.json, has 8 levels).
MAX_DEPTH = 32
#: Characters of one key of a TOML or JSON document (ours: the longest real key has ~40).
MAX_KEY_CHARS = 1024
#: Keys of one TOML document: pairs and table headers (ours: 10,000 [[flows]] tables of ~10 keys).
MAX_KEYS = 200_000
#: Dots of all dotted keys and table headers of one TOML document. tomllib records every prefix
#: of a dotted key, so its memory grows with the square of a key's parts: a 200 kB scenario of
#: long dotted keys took 5.9 GB before any depth check ran. Each key has at most MAX_DEPTH parts;
#: this bounds their sum (ours: the built-ins have none, a --config file a handful).
MAX_KEY_DOTS = 20_000
#: A leaderboard ledger read back on --resume (ours: 10,000 trials x 3 kinds x 10 policies at
#: ~400 bytes a line is 120 MB).
MAX_LEDGER_BYTES = 256 << 20
#: Periods x trials of one leaderboard trial kind: its targets are one (periods, trials) array
#: allocated before the first trial (ours: 400 MB of float64; the paper's 100 trials of 1,200
#: periods are 120,000).
MAX_TRIAL_CELLS = 50_000_000
#: Simulated seconds of one trial (ours, as the leaderboard plan's durations: one day).
MAX_TRIAL_SECONDS = 86_400.0
#: A scenario file (ours: the largest built-in is 2 kB; 10,000 [[flows]] tables fit in ~600 kB).
MAX_SCENARIO_BYTES = 1 << 20
#: Other text inputs: gains, notes, model metadata, results.json.
MAX_TEXT_BYTES = 64 << 20
#: The daemon's token file (a token and an address: ~150 bytes).
MAX_TOKEN_BYTES = 4096
#: One answer of the daemon's API read by ``control status|set-target`` (900 periods of history:
#: ~400 kB).
MAX_RESPONSE_BYTES = 8 << 20
#: Registered model names and the NAME of a ``models:/NAME/...`` reference, characters.
MAX_NAME = 256
#: Fewest rows an identification dataset must have to be trained on (ours: the inverse model has 22
#: inputs; below ~20 periods there is nothing to learn and k-fold CV has nothing to hold out).
MIN_DATASET_ROWS = 20
#: Largest magnitude of each dataset column (ours): rates at most a scenario's largest B_max
#: (1 Tbit/s), times at most 10^4 s (a scenario's RTT is at most 10 s), flows at most 10^8.
DATASET_RANGES: dict[str, float] = {
    "rate_dtn": 1e12, "rate_campus": 1e12, "u": 1e12, "rtt_dtn": 1e4, "rtt_campus": 1e4,
    "qdelay_dtn": 1e4, "qdelay_campus": 1e4, "active_flows": 1e8,
}

BOUNDS: dict[str, Bound] = {
    "trials": Bound(1, 10_000, "trials per experiment and policy (evaluate, reproduce)",
                    "paper: 100; each is one instance of a batched plant"),
    "fct_trials": Bound(1, 10_000, "FCT and utilisation trials per policy", "as trials"),
    "ns_trials": Bound(1, 10_000, "trials per N_s value of the sweep", "as trials"),
    "short_trials": Bound(1, 10_000, "short-flow trials", "as trials"),
    "ns_value": Bound(1, 100_000, "campus streams N_s of one sweep point",
                      "paper: up to 10,000; a scenario holds at most 100,000 campus streams"),
    "ns_max_flows": Bound(1, MAX_BATCH_FLOWS, "trials x N_s per sweep point", "the batch-flows bound below"),
    "generations": Bound(1, 10_000, "GA generations", "Table 2: 100"),
    "population": Bound(2, 10_000, "GA population", "Table 2: 30"),
    "parents": Bound(1, 10_000, "GA parents mating (also at most the population)", "Table 2: 15"),
    "episodes": Bound(1, 100, "fitness episodes per individual", "paper: 1"),
    "refine_episodes": Bound(1, 100, "episodes per candidate when refining gains", "ours: 2"),
    "refine_factors": Bound(1, 100, "scale factors tried when refining gains", "ours: 4 by default"),
    "workers": Bound(0, 256, "process-pool workers (0: in-process)", "ours: far above any core count here"),
    "epochs": Bound(1, 10_000, "training epochs", "ours: 30 by default"),
    "folds": Bound(2, 100, "k of the k-fold cross-validation (0: skip)", "paper: 5", zero_ok=True),
    "batch": Bound(1, 4096, "identification episodes run side by side", "ours: 32 by default"),
    "seed": Bound(0, 2**63 - 1, "random seeds", "a 64-bit seed, as the scenario's"),
    "steps": Bound(1, MAX_STEPS, "periods of one episode or identification (duration / period)",
                   "ours: 10^7 periods, 116 days at T = 1 s"),
    "batch_flows": Bound(1, MAX_BATCH_FLOWS, "plant instances x flows per instance in one batched plant",
                         "ours: bounds one batched plant's memory, which grows linearly with it"),
    "flow_tables": Bound(0, 10_000, "[[flows]] tables in a scenario", "ours: the Jenks tests use up to 8"),
    "flows": Bound(0, 100_000, "flows in all [[flows]] tables (their counts summed)", "ours: far above any real scenario, and one batched plant's memory grows with it"),
    "schedule": Bound(0, 10_000, "[time, rate] entries of one flow's schedule", "ours"),
    "depth": Bound(1, MAX_DEPTH, "nesting depth of TOML and JSON inputs", "ours: the deepest real one has 8"),
    "trial_cells": Bound(1, MAX_TRIAL_CELLS, "periods x trials of one leaderboard trial kind",
                         "ours: its (periods, trials) targets are allocated before the first trial"),
    "trial_seconds": Bound(0, MAX_TRIAL_SECONDS, "simulated seconds of one trial (an FCT trial: its bound, "
                           "4 x transfer / rate + 60 s)", "ours: one day, as the plan's durations"),
    "key_chars": Bound(1, MAX_KEY_CHARS, "characters of one key of a TOML or JSON input",
                       "ours: the longest real key has ~40"),
    "keys": Bound(0, MAX_KEYS, "keys (key = value pairs and table headers) of one TOML input",
                  "ours: 10,000 [[flows]] tables of ~10 keys each"),
    "key_dots": Bound(0, MAX_KEY_DOTS, "dots of all dotted keys and table headers of one TOML input",
                      "ours: tomllib's memory grows with the square of one key's parts; built-ins have none"),
    "ledger_bytes": Bound(0, MAX_LEDGER_BYTES, "bytes of a leaderboard ledger read on --resume",
                          "ours: 10,000 trials x 3 kinds x 10 policies at ~400 bytes a line is 120 MB"),
    "scenario_bytes": Bound(1, MAX_SCENARIO_BYTES, "bytes of a scenario file", "ours: built-ins are ~2 kB"),
    "text_bytes": Bound(0, MAX_TEXT_BYTES, "bytes of other text inputs (gains, notes, meta.json, results.json)",
                        "ours"),
    "token_bytes": Bound(1, MAX_TOKEN_BYTES, "bytes of the daemon's token file", "ours: ~150 are used"),
    "response_bytes": Bound(0, MAX_RESPONSE_BYTES, "bytes of one API answer read by control status/set-target",
                            "ours: the longest, /history, is ~400 kB"),
    "request_bytes": Bound(1, 4096, "bytes of a POST /target body", "ours: {\"target\": \"400M\"} is 20"),
    "name": Bound(1, MAX_NAME, "characters of a registered model name", "ours"),
    "dataset_rows": Bound(1, 10 * MAX_STEPS, "rows of an identification dataset read (before it is read)",
                          "ours: 10 x the longest episode"),
    "train_rows": Bound(MIN_DATASET_ROWS, 10 * MAX_STEPS, "rows of a dataset to train on",
                        "ours: fewer leave nothing to learn and nothing to hold out"),
}


def _as_number(value: Any, option: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{option}: expected a number, got {value!r}")
    v = float(value) if not isinstance(value, int) else value
    if isinstance(v, float) and not math.isfinite(v):
        raise ValueError(f"{option}: must be a finite number, got {value!r}")
    return v


def check(key: str, value: Any, option: str | None = None) -> Any:
    """``value`` if it is within ``BOUNDS[key]``; else one-line ``ValueError`` naming ``option``."""
    b = BOUNDS[key]
    opt = option or key
    v = _as_number(value, opt)
    if b.zero_ok and v == 0:
        return value
    if not b.lo <= v <= b.hi:
        shown = _num(v) if abs(v) < 1e15 else f"a {len(str(int(v)))}-digit number" if isinstance(v, int) else f"{v:g}"
        raise ValueError(f"{opt} must be {b.describe()} ({b.what}), got {shown}")
    return value


def depth(obj: Any, limit: int = MAX_DEPTH) -> int:
    """Nesting depth of dicts and lists in ``obj`` (iterative: a deep document cannot overflow the stack);
    counting stops past ``limit``."""
    deepest = 0
    stack = [(obj, 1)]
    while stack:
        o, d = stack.pop()
        if not isinstance(o, dict | list | tuple):
            continue
        deepest = max(deepest, d)
        if deepest > limit:
            return deepest
        stack.extend((v, d + 1) for v in (o.values() if isinstance(o, dict) else o))
    return deepest


def check_depth(obj: Any, what: str) -> Any:
    """``obj`` if it nests at most ``MAX_DEPTH`` levels; one-line ``ValueError`` naming ``what`` otherwise."""
    if depth(obj) > MAX_DEPTH:
        raise ValueError(f"{what}: nested deeper than {MAX_DEPTH} levels")
    return obj
