"""Host policies: the DTN streams' pacing rate, every control period T (``kind = "host"``).

A host policy acts at the DTN itself instead of at the campus border: every T
it returns the DTN's aggregate pacing rate per instance (bit/s, ``decide``),
which the plant applies to the DTN's sockets (``SO_MAX_PACING_RATE``, through
``plant.base.HostPlant.set_pacing``), and the campus rate u it keeps meanwhile
(``campus_rate``). Protocol: ``scidmz.policies.base.HostPolicy``.

- ``pacing``: each DTN stream paced at R*_DTN / streams, the campus TBF at
  B_max - R*_DTN (``pacing.py``; ESnet's host tuning, ours in scidmz).

A host policy needs control of the DTN host (root or CAP_SYS_PTRACE there to
reach its sender's sockets, ``actuators.pacing``): a plant without it
(``hardware``) refuses host policies.
"""
