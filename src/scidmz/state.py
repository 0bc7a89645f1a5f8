"""The shared vocabulary: ``NetworkState`` y(t), ``History`` and ``Trace``.

``NetworkState`` holds the seven variables of Table 3 of the MLC paper
(Vega et al., section 3.6) in their fixed order, SI units. ``Trace`` is one
run as a table, saved as Parquet with the scenario, policy and seed in the
file metadata. ``History`` is the in-memory, batched record a ``Policy``
sees while a loop runs.

Alignment (ARCHITECTURE.md): u_k is applied over [kT, (k+1)T) and y_k is
measured at the end of that interval.

The constants that are part of y's definition (Algorithm 4's smoothing of
the campus RTT, Algorithm 7's activity threshold) live here too, so every
plant and telemetry source reports the same y.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .units import FRAME_BYTES

__all__ = ["STATE_FIELDS", "NetworkState", "History", "Trace", "TRACE_COLUMNS", "json_default",
           "json_default_lenient", "RTT_CAMPUS_ALPHA", "ACTIVE_PACKETS", "ACTIVE_BYTES"]

#: Algorithm 4 smooths the campus RTT across periods: RTT <- a RTT + (1 - a) mean of the period.
#: The paper names alpha without a value; 0.5 is ours (the fluid plant, the netns kernel counters
#: and the data plane on the testbed's taps all use it).
RTT_CAMPUS_ALPHA = 0.5
#: Algorithm 7's activity threshold C_TH: a flow is active in a period if it moved at least this
#: many full-size packets (the paper names the threshold without a value; 10 is ours).
ACTIVE_PACKETS = 10
#: The same threshold in frame bytes, for sources that count bytes rather than packets.
ACTIVE_BYTES = ACTIVE_PACKETS * FRAME_BYTES

STATE_FIELDS: tuple[str, ...] = (
    "rate_dtn",
    "rate_campus",
    "rtt_dtn",
    "rtt_campus",
    "qdelay_dtn",
    "qdelay_campus",
    "active_flows",
)
N_STATE = len(STATE_FIELDS)
TRACE_COLUMNS: tuple[str, ...] = ("t", *STATE_FIELDS, "u", "target")


@dataclass(frozen=True, slots=True)
class NetworkState:
    """y(t): one sample per control period T, SI units (bit/s, s, count)."""

    t: float
    rate_dtn: float
    rate_campus: float
    rtt_dtn: float
    rtt_campus: float
    qdelay_dtn: float
    qdelay_campus: float
    active_flows: float

    def as_vector(self) -> np.ndarray:
        """The 7 values in the fixed Table 3 order (every model input uses it)."""
        return np.array([getattr(self, f) for f in STATE_FIELDS], dtype=np.float64)

    @classmethod
    def from_vector(cls, t: float, vec: np.ndarray | list[float]) -> NetworkState:
        v = np.asarray(vec, dtype=np.float64).reshape(-1)
        if v.size != N_STATE:
            raise ValueError(f"NetworkState needs {N_STATE} values, got {v.size}")
        return cls(float(t), *(float(x) for x in v))

    def as_dict(self) -> dict[str, float]:
        return {"t": self.t, **{f: getattr(self, f) for f in STATE_FIELDS}}


class History:
    """What a policy sees: the batched past of one loop run.

    ``y`` has shape (k, B, 7), ``u`` and ``target`` shape (k, B): row j is
    period j (u_j applied over [jT, (j+1)T), y_j measured at its end). At the
    first decision k == 0 and ``y0`` (the state after ``reset``) is the only
    measurement available. Storage grows by doubling, so appending is O(1).
    """

    def __init__(self, y0: np.ndarray, capacity_hint: int = 128) -> None:
        self.y0 = np.atleast_2d(np.asarray(y0, dtype=np.float64))
        if self.y0.shape[1] != N_STATE:
            raise ValueError(f"History.y0 must have shape (B, {N_STATE}), got {self.y0.shape}")
        b = self.y0.shape[0]
        n = max(int(capacity_hint), 1)
        self._y = np.empty((n, b, N_STATE))
        self._u = np.empty((n, b))
        self._target = np.empty((n, b))
        self._k = 0

    @property
    def batch(self) -> int:
        return self.y0.shape[0]

    def __len__(self) -> int:
        return self._k

    @property
    def y(self) -> np.ndarray:
        return self._y[: self._k]

    @property
    def u(self) -> np.ndarray:
        return self._u[: self._k]

    @property
    def target(self) -> np.ndarray:
        return self._target[: self._k]

    def last_y(self, lag: int = 1) -> np.ndarray:
        """y(t - lag*T) as (B, 7); before the first period, the reset state."""
        k = self._k - lag
        return self._y[k] if k >= 0 else self.y0

    def last_u(self, default: np.ndarray | float) -> np.ndarray:
        """u(t - T) as (B,); ``default`` before the first period."""
        if self._k:
            return self._u[self._k - 1].copy()
        return np.broadcast_to(np.asarray(default, dtype=np.float64), (self.batch,)).copy()

    def append(self, u: np.ndarray, y: np.ndarray, target: np.ndarray) -> None:
        if self._k == self._y.shape[0]:
            grow = self._y.shape[0]
            self._y = np.concatenate([self._y, np.empty_like(self._y[:grow])])
            self._u = np.concatenate([self._u, np.empty_like(self._u[:grow])])
            self._target = np.concatenate([self._target, np.empty_like(self._target[:grow])])
        self._y[self._k] = np.asarray(y, dtype=np.float64).reshape(self.batch, N_STATE)
        self._u[self._k] = np.asarray(u, dtype=np.float64).reshape(self.batch)
        self._target[self._k] = np.asarray(target, dtype=np.float64).reshape(self.batch)
        self._k += 1


#: Version of the Parquet layout below; bumped when a reader of the old layout would misread.
TRACE_FORMAT_VERSION = 1


class Trace:
    """One run as a table: ``t``, the seven y columns, ``u``, ``target``, plus
    any ground-truth columns a plant adds. ``meta`` (scenario, policy, seed,
    ...) is stored in the Parquet file's metadata under the key ``scidmz``.

    File format (``to_parquet``, ``TRACE_FORMAT_VERSION`` = 1): one Parquet table,
    one row per control period: ``t`` (s, end of the period), the seven
    ``STATE_FIELDS`` in Table 3 order and units (bit/s, s, count), ``u`` (bit/s
    applied over the period), ``target`` (R*_DTN, bit/s), then any plant columns
    (``stale_*`` flags, per-class bytes and losses, ``dtn_fct``, ...). The schema
    metadata key ``scidmz`` holds ``meta`` as JSON: ``format_version``,
    ``scidmz_version``, and what the writer knew -- for a runner episode
    ``scenario`` (its ``to_dict()``), ``policy``, ``seed``, ``instance``, ``plant``
    and ``plant_model`` (the fluid model's fingerprint; null for real networks);
    datasets add their recording parameters. A file without ``format_version`` was
    written before the field existed and reads the same.
    """

    def __init__(self, df: Any, meta: dict[str, Any] | None = None) -> None:
        self.meta: dict[str, Any] = dict(meta or {})
        self._cols: dict[str, np.ndarray] | None = None
        self._df: Any = None
        if isinstance(df, dict):
            # Columns stay NumPy arrays until someone asks for ``df``: importing pandas
            # costs ~0.8 s, more than a whole `scidmz simulate` run should take.
            cols = {str(k): np.asarray(v) for k, v in df.items()}
            lengths = {len(v) for v in cols.values()}
            if len(lengths) > 1:
                raise ValueError(f"trace columns differ in length: {sorted(lengths)}")
            names: Any = cols
            self._cols = cols
        else:
            import pandas as pd

            if not isinstance(df, pd.DataFrame):
                df = pd.DataFrame(df)
            names = df.columns
            self._df = df.reset_index(drop=True)
        missing = [c for c in TRACE_COLUMNS if c not in names]
        if missing:
            raise ValueError(f"trace is missing column(s): {', '.join(missing)}")

    @property
    def df(self) -> Any:
        """The trace as a pandas DataFrame (built on first use)."""
        if self._df is None:
            import pandas as pd

            self._df = pd.DataFrame(self._cols)
            self._cols = None  # one source of truth from now on: callers may change the frame
        return self._df

    @property
    def columns(self) -> list[str]:
        return list(self._cols) if self._cols is not None else [str(c) for c in self._df.columns]

    def column(self, name: str) -> np.ndarray:
        """One column as a NumPy array (no pandas needed for a trace built from arrays)."""
        if self._cols is not None:
            if name not in self._cols:
                raise KeyError(name)
            return self._cols[name]
        return self._df[name].to_numpy()

    # -- construction -------------------------------------------------------
    @classmethod
    def from_arrays(
        cls,
        t: np.ndarray,
        y: np.ndarray,
        u: np.ndarray,
        target: np.ndarray,
        extra: dict[str, np.ndarray] | None = None,
        meta: dict[str, Any] | None = None,
    ) -> Trace:
        y = np.asarray(y, dtype=np.float64).reshape(-1, N_STATE)
        cols: dict[str, Any] = {"t": np.asarray(t, dtype=np.float64)}
        cols.update({f: y[:, i] for i, f in enumerate(STATE_FIELDS)})
        cols["u"] = np.asarray(u, dtype=np.float64)
        cols["target"] = np.asarray(target, dtype=np.float64)
        for k, v in (extra or {}).items():
            cols[k] = np.asarray(v)
        return cls(cols, meta)

    # -- access -------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.column("t")) if self._cols is not None else len(self._df)

    @property
    def y(self) -> np.ndarray:
        """(n, 7) array of the state columns in Table 3 order."""
        return np.column_stack([np.asarray(self.column(f), dtype=np.float64) for f in STATE_FIELDS])

    def states(self) -> list[NetworkState]:
        return [NetworkState.from_vector(t, v) for t, v in zip(self.column("t"), self.y, strict=True)]

    def validate(self, allow_nan: bool = False) -> Trace:
        """Raise a one-line ValueError if required columns hold NaN/inf."""
        if not allow_nan:
            vals = np.column_stack([np.asarray(self.column(c), dtype=np.float64) for c in TRACE_COLUMNS])
            bad = ~np.isfinite(vals)
            if bad.any():
                row, col = np.argwhere(bad)[0]
                raise ValueError(
                    f"trace has {int(bad.sum())} non-finite value(s), first in column "
                    f"'{TRACE_COLUMNS[col]}' at row {int(row)}"
                )
        return self

    # -- Parquet ------------------------------------------------------------
    def to_parquet(self, path: str | os.PathLike[str]) -> Path:
        """Write atomically (temp file + rename): a crash never leaves half a file."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        from ._version import __version__
        from .fileio import atomic_path

        path = Path(path)
        table = pa.Table.from_pandas(self.df, preserve_index=False)
        md = dict(table.schema.metadata or {})
        meta = {**self.meta, "format_version": TRACE_FORMAT_VERSION, "scidmz_version": __version__}
        md[b"scidmz"] = json.dumps(meta, default=json_default).encode()
        table = table.replace_schema_metadata(md)
        with atomic_path(path) as tmp:
            pq.write_table(table, tmp)
        return path

    @classmethod
    def read_parquet(cls, path: str | os.PathLike[str]) -> Trace:
        import pyarrow.parquet as pq

        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"trace file not found: {path}")
        try:
            table = pq.read_table(path)
        except Exception as exc:  # pyarrow raises several types for corrupt files
            raise ValueError(f"{path}: not a readable Parquet trace ({exc})") from None
        raw = (table.schema.metadata or {}).get(b"scidmz", b"{}")
        from .fileio import parse_json

        meta = parse_json(raw or b"{}", f"{path}: trace metadata")  # bounded depth, one line
        if not isinstance(meta, dict):
            raise ValueError(f"{path}: trace metadata is not a JSON object")
        try:
            df = table.to_pandas()
        except RecursionError:  # pandas' own metadata in the file, nested beyond Python's stack
            raise ValueError(f"{path}: not a readable Parquet trace (its pandas metadata is nested too deeply)") from None
        try:
            return cls(df, meta)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None

    @classmethod
    def concat(cls, traces: list[Trace], key: str = "episode") -> Trace:
        """Stack traces into one table with an ``episode`` column (meta of the first)."""
        import pandas as pd

        frames = [tr.df.assign(**{key: i}) for i, tr in enumerate(traces)]
        meta = dict(traces[0].meta) if traces else {}
        meta["episodes"] = len(traces)
        return cls(pd.concat(frames, ignore_index=True), meta)

    def __repr__(self) -> str:
        return f"Trace({len(self)} rows, meta={self.meta})"


def json_default(o: Any) -> Any:
    """``json.dumps(default=...)`` for NumPy scalars/arrays and paths."""
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def json_default_lenient(o: Any) -> Any:
    """``json_default`` that never fails: an unknown object becomes its ``str`` (a log, API or
    ``--json`` line must not break on an odd value)."""
    try:
        return json_default(o)
    except TypeError:
        return str(o)
