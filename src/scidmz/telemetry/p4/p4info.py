"""P4Runtime protobufs and P4Info name -> id resolution.

The PyPI ``p4runtime`` wheel (1.6.0, the newest) ships ``*_pb2.py`` files made by
an old protoc; protobuf >= 4 (upb) refuses to import them ("Descriptors cannot
be created directly"). Rather than force the slow pure-Python protobuf backend
on the whole process (which only works if nothing imported protobuf first), the
serialized ``FileDescriptorProto`` each of those files embeds is added to the
default descriptor pool (next to the well-known types it imports) and message
classes are built from it. The wire format
is the proto's, so a real switch (BMv2 ``simple_switch_grpc``, Stratum) cannot
tell the difference. The wheel's modules are never imported, even where they
would import (pure-Python protobuf): there their map fields (P4Info
``type_info.structs``) do not parse under protobuf 7, while classes built from
the descriptors work under both backends.

gRPC calls go through ``grpc`` generic callables with the method paths of the
``p4.v1.P4Runtime`` service, so the generated ``*_pb2_grpc`` stubs (which import
the broken modules) are not needed.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "P4RT_SERVICE",
    "P4Protos",
    "protos",
    "P4InfoIndex",
    "TableInfo",
    "RegisterInfo",
    "CounterInfo",
    "DigestInfo",
    "encode_uint",
    "decode_uint",
]

P4RT_SERVICE = "p4.v1.P4Runtime"

_P4_FILES = (
    # dependency order: each file only imports files earlier in the list
    ("p4/config/v1/p4types.proto", "config/v1/p4types_pb2.py"),
    ("p4/config/v1/p4info.proto", "config/v1/p4info_pb2.py"),
    ("p4/v1/p4data.proto", "v1/p4data_pb2.py"),
    ("p4/v1/p4runtime.proto", "v1/p4runtime_pb2.py"),
)


class P4Protos:
    """Message classes of p4/v1/p4runtime.proto and p4/config/v1/p4info.proto.

    ``P4Protos.msg("p4.v1.WriteRequest")`` returns the class; the common ones are
    attributes too (``p.WriteRequest``, ``p.P4Info``, ...). Nested types are
    reached by their full name (``p.msg("p4.v1.TableEntry")``) or, as usual, by
    adding to repeated fields (``te.match.add()``).
    """

    def __init__(self, pool: Any) -> None:
        self.pool = pool
        self._cache: dict[str, Any] = {}

    def msg(self, full_name: str) -> Any:
        cls = self._cache.get(full_name)
        if cls is None:
            from google.protobuf import message_factory

            desc = self.pool.FindMessageTypeByName(full_name)
            cls = message_factory.GetMessageClass(desc)
            self._cache[full_name] = cls
        return cls

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        for pkg in ("p4.v1.", "p4.config.v1."):
            try:
                return self.msg(pkg + name)
            except KeyError:
                continue
        raise AttributeError(f"no P4Runtime message named {name!r}")

    def enum_value(self, enum_full_name: str, value_name: str) -> int:
        return self.pool.FindEnumTypeByName(enum_full_name).values_by_name[value_name].number


def _embedded_descriptor(path: Path) -> bytes:
    """The serialized FileDescriptorProto inside a generated ``*_pb2.py``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "serialized_pb":
            return ast.literal_eval(node.value)
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "AddSerializedFile":
            return ast.literal_eval(node.args[0])
    raise ValueError(f"{path}: no embedded descriptor found (unknown p4runtime wheel layout)")


@functools.lru_cache(maxsize=1)
def protos() -> P4Protos:
    """Load the P4Runtime protobufs once (see the module docstring for why this way)."""
    if importlib.util.find_spec("google.protobuf") is None:
        raise ImportError("P4Runtime support needs protobuf: pip install 'scidmz[telemetry]'")
    from google.protobuf import any_pb2, descriptor_pool  # noqa: F401  (registers google/protobuf/any.proto)
    from google.rpc import status_pb2  # noqa: F401  (registers google/rpc/status.proto)

    spec = importlib.util.find_spec("p4")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("P4Runtime support needs the 'p4runtime' package: pip install 'scidmz[telemetry]'")
    root = Path(next(iter(spec.submodule_search_locations)))
    # The default pool, not a private one: copying the well-known types (Any,
    # Status) into a second pool makes upb crash intermittently when messages
    # holding them are copied across threads (https://github.com/protocolbuffers/protobuf/issues/12047).
    pool = descriptor_pool.Default()
    for name, rel in _P4_FILES:
        try:
            pool.FindFileByName(name)
        except KeyError:
            pool.AddSerializedFile(_embedded_descriptor(root / rel))
    protos_ = P4Protos(pool)
    # Create every message class now, in this thread: upb otherwise creates a
    # submessage's class on first access, which may then happen on a gRPC
    # stream thread while another thread does the same (suspected cause of an
    # intermittent upb segfault in a CopyFrom on a stream thread).
    names = ["google.rpc.Status", "google.protobuf.Any"]
    for name, _ in _P4_FILES:
        stack = list(pool.FindFileByName(name).message_types_by_name.values())
        while stack:
            d = stack.pop()
            names.append(d.full_name)
            stack.extend(d.nested_types)
    for n in names:
        protos_.msg(n)
    return protos_


# -- P4Runtime bytestrings ---------------------------------------------------------


def encode_uint(value: int, bitwidth: int) -> bytes:
    """Canonical P4Runtime bytestring: big-endian, shortest form (P4Runtime spec 8.4)."""
    value = int(value)
    if value < 0 or value >= (1 << bitwidth):
        raise ValueError(f"value {value} does not fit in {bitwidth} bits")
    n = max(1, (value.bit_length() + 7) // 8)
    return value.to_bytes(n, "big")


def decode_uint(data: bytes) -> int:
    return int.from_bytes(data, "big") if data else 0


# -- P4Info index --------------------------------------------------------------------


@dataclass(frozen=True)
class TableInfo:
    id: int
    name: str
    size: int
    match_fields: dict[str, tuple[int, int, str]]  # name -> (id, bitwidth, match type)
    actions: dict[str, int]  # action name -> id
    direct_counter_id: int = 0


@dataclass(frozen=True)
class RegisterInfo:
    id: int
    name: str
    size: int
    bitwidth: int


@dataclass(frozen=True)
class CounterInfo:
    id: int
    name: str
    size: int
    unit: str
    direct_table_id: int = 0


@dataclass(frozen=True)
class DigestInfo:
    id: int
    name: str
    members: tuple[tuple[str, int], ...]  # (field name, bitwidth) in struct order


@dataclass
class P4InfoIndex:
    """Names -> ids of one P4 program, built from its P4Info.

    Lookups accept the fully qualified name p4c writes (``ScidmzIngress.class_lpm``)
    or any dotted suffix of it (``class_lpm``) when that suffix is unique.
    """

    p4info: Any
    tables: dict[str, TableInfo] = field(default_factory=dict)
    actions: dict[str, int] = field(default_factory=dict)
    registers: dict[str, RegisterInfo] = field(default_factory=dict)
    counters: dict[str, CounterInfo] = field(default_factory=dict)
    direct_counters: dict[str, CounterInfo] = field(default_factory=dict)
    digests: dict[str, DigestInfo] = field(default_factory=dict)

    @classmethod
    def from_text(cls, text: str) -> P4InfoIndex:
        from google.protobuf import text_format

        p = protos()
        msg = p.msg("p4.config.v1.P4Info")()
        try:
            text_format.Parse(text, msg)
        except text_format.ParseError as exc:
            raise ValueError(f"P4Info text does not parse: {exc}") from None
        return cls.from_message(msg)

    @classmethod
    def from_file(cls, path: str | Path) -> P4InfoIndex:
        from ...fileio import read_bytes_input, read_text_input

        path = Path(path)
        if not path.exists():
            raise ValueError(f"P4Info file not found: {path}")
        # Through the input gate: a regular file of bounded size (/dev/zero or a FIFO given as the
        # P4Info was read until the OOM killer stopped it, or hung).
        if path.suffix in (".bin", ".pb"):
            p = protos()
            msg = p.msg("p4.config.v1.P4Info")()
            msg.ParseFromString(read_bytes_input(path, "P4Info file"))
            return cls.from_message(msg)
        text = read_text_input(path, "P4Info file")
        try:
            return cls.from_text(text)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None

    @classmethod
    def from_message(cls, msg: Any) -> P4InfoIndex:
        idx = cls(p4info=msg)
        for a in msg.actions:
            idx.actions[a.preamble.name] = a.preamble.id
        for dc in msg.direct_counters:
            unit = _unit_name(dc.spec.unit)
            idx.direct_counters[dc.preamble.name] = CounterInfo(
                dc.preamble.id, dc.preamble.name, 0, unit, dc.direct_table_id
            )
        for t in msg.tables:
            mf = {m.name: (m.id, m.bitwidth, _match_name(m)) for m in t.match_fields}
            acts = {}
            for ref in t.action_refs:
                for name, aid in idx.actions.items():
                    if aid == ref.id:
                        acts[name] = aid
            dcid = next(iter(t.direct_resource_ids), 0)
            idx.tables[t.preamble.name] = TableInfo(
                t.preamble.id, t.preamble.name, int(t.size), mf, acts, dcid
            )
        for c in msg.counters:
            idx.counters[c.preamble.name] = CounterInfo(
                c.preamble.id, c.preamble.name, int(c.size), _unit_name(c.spec.unit)
            )
        for r in msg.registers:
            width = r.type_spec.bitstring.bit.bitwidth
            idx.registers[r.preamble.name] = RegisterInfo(
                r.preamble.id, r.preamble.name, int(r.size), int(width)
            )
        structs = msg.type_info.structs
        for d in msg.digests:
            sname = d.type_spec.struct.name
            if sname not in structs:
                raise ValueError(f"P4Info digest {d.preamble.name!r}: struct {sname!r} missing")
            members = tuple(
                (m.name, int(m.type_spec.bitstring.bit.bitwidth)) for m in structs[sname].members
            )
            idx.digests[d.preamble.name] = DigestInfo(d.preamble.id, d.preamble.name, members)
        return idx

    @staticmethod
    def _find(kind: str, table: dict[str, Any], name: str) -> Any:
        if name in table:
            return table[name]
        hits = [v for k, v in table.items() if k.endswith("." + name)]
        if len(hits) == 1:
            return hits[0]
        if not hits:
            raise ValueError(f"P4Info has no {kind} named {name!r}")
        raise ValueError(f"P4Info {kind} name {name!r} is ambiguous")

    def table(self, name: str) -> TableInfo:
        return self._find("table", self.tables, name)

    def action_id(self, name: str) -> int:
        return self._find("action", self.actions, name)

    def register(self, name: str) -> RegisterInfo:
        return self._find("register", self.registers, name)

    def counter(self, name: str) -> CounterInfo:
        return self._find("counter", self.counters, name)

    def direct_counter(self, name: str) -> CounterInfo:
        return self._find("direct counter", self.direct_counters, name)

    def digest(self, name: str) -> DigestInfo:
        return self._find("digest", self.digests, name)

    def names(self) -> dict[str, list[str]]:
        """Every P4 object name by kind (for lockstep tests and diagnostics)."""
        return {
            "tables": sorted(self.tables),
            "actions": sorted(self.actions),
            "registers": sorted(self.registers),
            "counters": sorted(self.counters),
            "direct_counters": sorted(self.direct_counters),
            "digests": sorted(self.digests),
        }


def _unit_name(unit: int) -> str:
    return {0: "UNSPECIFIED", 1: "BYTES", 2: "PACKETS", 3: "BOTH"}.get(int(unit), "UNSPECIFIED")


def _match_name(m: Any) -> str:
    return {0: "UNSPECIFIED", 2: "EXACT", 3: "LPM", 4: "TERNARY", 5: "RANGE", 6: "OPTIONAL"}.get(
        int(m.match_type), "OTHER"
    )
