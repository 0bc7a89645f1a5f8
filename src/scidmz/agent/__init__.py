"""``scidmz agent``: the DTN host agent (ARCHITECTURE.md, "Deployment on a real network").

It runs on the DTN host, owns the pacing of the DTN's WAN transfers and takes
its aggregate rate from the controller over a token-protected HTTP API, under a
lease. One module per concern:

* ``match``: which sockets (peer prefixes, port ranges, process names);
* ``diag``: every established TCP socket with its ``tcp_info`` in one netlink dump;
* ``owners``: which process and descriptor hold a socket (``/proc/PID/fd``);
* ``mechanism``: how a rate reaches a socket (``pidfd_getfd`` + ``SO_MAX_PACING_RATE``, the default);
  ``bpfiter``: the other mechanism, a BPF TCP iterator that lists and paces in one walk;
* ``share``: how the aggregate is shared among live connections (max-min water-filling, ours);
* ``lease``: the fail-open lease; ``record``: the owner record a fresh start reclaims from;
* ``hostcaps``: what the host's own qdiscs already cap;
* ``core``: the per-period loop (``DtnAgent``); ``api``/``prometheus``: its HTTP side;
  ``client``: what a controller uses to talk to it.
"""
