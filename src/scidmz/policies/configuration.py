"""Configurations: at most one policy per place, acting in one run (ARCHITECTURE.md "Configurations (v4)").

An admin acts in several places at once: pace the DTN *and* let a PI shape the
campus (``pacing+pi``), pace it *and* separate the border's queues
(``pacing+jenks``). A configuration is written as its members' registry names
joined by ``+``; its canonical form lists them by place in the order host,
rate, queue, discipline (``POLICY_KINDS_ORDER``), so ``pi+pacing``
and ``pacing+pi`` are one configuration, named ``pacing+pi`` wherever a name is
written (results, ledgers, traces) or compared.

- ``parse_configuration(text)``: the member names, canonical order; one line
  (``ValueError``) for an empty member, an unknown name, or two policies of one
  kind (the registry, ``policy_kind``, says which kind each name is).
- ``canonical_name(text)``: ``"+".join(parse_configuration(text))``.
- ``split_member_options(names, options)``: ``--set policy.KEY=VALUE`` items to
  each member's factory options (rule below).
- ``build_configuration(text, options, files)``: the policy object: a
  one-member configuration is the member itself (today's policy, bit for
  bit); several members make a ``Configuration``.
- ``Configuration``: the members by place (``members``), ``name`` (canonical),
  ``kind`` (the places joined by ``+``, e.g. ``host+rate``, never one of
  ``POLICY_KINDS``, so code that expects one kind fails loudly), ``reset``
  delegating to every member. The episode runner applies each member through
  its plant capability (``scidmz.runner``); ``scidmz.kinds.policy_places``
  reads any policy's members by place.

Per-member options (ours): ``policy.MEMBER.KEY=VALUE`` sets option KEY of
member MEMBER (``policy.jenks.queues=4``); ``policy.KEY=VALUE`` goes to the one
member whose factory takes KEY, and is refused with one line when none or
several do (then name the member). A one-member configuration takes both forms,
so today's ``policy.KEY=VALUE`` works unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..kinds import POLICY_KINDS, Policy
from ..scenario import Scenario
from .registry import make_policy, policy_kind, policy_options

__all__ = ["Configuration", "parse_configuration", "canonical_name", "split_member_options",
           "build_configuration", "SEPARATOR", "POLICY_KINDS_ORDER"]

#: Joins a configuration's members: ``pacing+pi``.
SEPARATOR = "+"

#: Canonical order of places in a configuration's name (ours: the DTN host first, as an admin
#: reads "pace the DTN, and ..."; then the campus rate, the border's queues, the bottleneck).
POLICY_KINDS_ORDER: tuple[str, ...] = ("host", "rate", "queue", "discipline")
if set(POLICY_KINDS_ORDER) != set(POLICY_KINDS):  # pragma: no cover - a new kind must be placed here
    raise RuntimeError("configuration.POLICY_KINDS_ORDER must list every kind of scidmz.kinds.POLICY_KINDS")


def parse_configuration(text: str) -> tuple[str, ...]:
    """A configuration's member names in canonical order (host, rate, queue, discipline); one line if bad."""
    raw = str(text).strip()
    names = [n.strip() for n in raw.split(SEPARATOR)]
    if not raw or any(not n for n in names):
        raise ValueError(f"policy {text!r}: empty member (write NAME or NAME+NAME+..., e.g. pacing+pi)")
    by_kind: dict[str, str] = {}
    for n in names:
        kind = policy_kind(n)  # unknown name: the registry's one line, listing the choices
        if kind in by_kind:
            what = "named twice" if by_kind[kind] == n else f"and '{by_kind[kind]}' are both {kind} policies"
            raise ValueError(f"policy {text!r}: '{n}' {what}; a configuration takes at most one policy per "
                             f"place ({', '.join(POLICY_KINDS_ORDER)})")
        by_kind[kind] = n
    return tuple(by_kind[k] for k in POLICY_KINDS_ORDER if k in by_kind)


def canonical_name(text: str) -> str:
    """The configuration's canonical name: ``pi+pacing`` -> ``pacing+pi``; one line if bad."""
    return SEPARATOR.join(parse_configuration(text))


def split_member_options(names: Sequence[str], options: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """``policy.*`` options (keys ``KEY`` or ``MEMBER.KEY``) -> each member's factory options.

    The rule is the module docstring's; one-line ``ValueError`` for a member not
    in the configuration, or a KEY that no member, or more than one, takes.
    """
    out: dict[str, dict[str, Any]] = {n: {} for n in names}
    label = SEPARATOR.join(names)
    for key, value in options.items():
        member, dot, opt = key.partition(".")
        if dot:
            if member not in out:
                raise ValueError(f"--set policy.{key}: '{member}' is not a member of {label}")
            if opt not in policy_options(member):
                raise ValueError(_unknown(member, opt, [member]))
            out[member][opt] = value
            continue
        takers = [n for n in names if key in policy_options(n)]
        if len(takers) > 1:
            raise ValueError(f"--set policy.{key}: ambiguous, {' and '.join(takers)} both take '{key}' "
                             f"(write policy.{takers[0]}.{key}=...)")
        if not takers:
            raise ValueError(_unknown(label, key, names))
        out[takers[0]][key] = value
    return out


def _unknown(name: str, key: str, members: Sequence[str]) -> str:
    """The registry's wording for an option no member takes (one line)."""
    known = [k for n in members for k in policy_options(n)]
    if not known:
        return f"policy '{name}' takes no policy.* options (got {key})"
    return f"policy '{name}': unknown option '{key}' (options: {', '.join(known)})"


def build_configuration(text: str, options: Mapping[str, Any] | None = None,
                        files: Callable[[str], Mapping[str, Any]] | None = None) -> Policy:
    """The policy object of configuration ``text`` (one member: the member itself; else a ``Configuration``).

    ``options``: ``--set policy.*`` items without the prefix (``split_member_options``);
    ``files(member)``: that member's trained files as factory options (the
    assembly's ``policy_files``), asked once per member.
    """
    names = parse_configuration(text)
    per = split_member_options(names, options or {})
    built = [make_policy(n, **{**per[n], **(files(n) if files is not None else {})}) for n in names]
    return built[0] if len(built) == 1 else Configuration(built)


class Configuration:
    """Several policies, at most one per place, run together (module docstring)."""

    def __init__(self, members: Sequence[Policy]) -> None:
        by_kind: dict[str, Policy] = {}
        for p in members:
            kind = str(getattr(p, "kind", None))
            if kind not in POLICY_KINDS:
                raise ValueError(f"configuration member {getattr(p, 'name', p)!r} declares no kind ({kind})")
            if kind in by_kind:
                raise ValueError(f"configuration: '{by_kind[kind].name}' and '{p.name}' are both {kind} policies")
            by_kind[kind] = p
        if len(by_kind) < 2:
            raise ValueError("a Configuration needs at least two members (one policy is run as itself)")
        #: The members by place, in canonical order.
        self.members: dict[str, Policy] = {k: by_kind[k] for k in POLICY_KINDS_ORDER if k in by_kind}
        self.name = SEPARATOR.join(p.name for p in self.members.values())
        self.kind = SEPARATOR.join(self.members)

    def reset(self, scenario: Scenario, batch: int = 1) -> None:
        """Reset every member before a new episode of ``batch`` instances."""
        for p in self.members.values():
            p.reset(scenario, batch)

    @property
    def fallbacks(self) -> Any:
        """The rate member's count of fallbacks (the MLC's), which the controller reads; None without."""
        rate = self.members.get("rate")
        return getattr(rate, "fallbacks", None) if rate is not None else None

    def __repr__(self) -> str:
        return f"Configuration({self.name})"
