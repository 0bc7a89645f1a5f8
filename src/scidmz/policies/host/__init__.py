"""Host policies: the DTN streams' pacing rate, every control period T (``kind = "host"``).

A host policy acts at the DTN itself instead of at the campus border: every T
it returns the DTN's aggregate pacing rate per instance (bit/s, ``decide``),
which the plant applies to the DTN's sockets (``SO_MAX_PACING_RATE``, through
``plant.base.HostPlant.set_pacing``), and the campus rate u it keeps meanwhile
(``campus_rate``). Protocol: ``scidmz.policies.base.HostPolicy``.

None is built in yet: ARCHITECTURE.md's ``pacing`` policy will live here as
``pacing.py`` and register itself with
``register_policy("pacing", "host", ...)`` (plus one line in
``policies/registry.py``'s built-in table).
"""
