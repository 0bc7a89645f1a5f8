"""Traffic on the testbed.

* ``episode.py``: ``Traffic``, one episode's senders and the servers they talk to;
* ``flows.py``: the scenario's ``[[flows]]``, one sender host per flow;
* ``iperf.py``: every generator's command line, and iperf3's reports;
* ``sockflows.py``: our own socket traffic (fixed-size transfers with an FCT,
  Table 6's Weibull short flows), run as a process in a sender's namespace.
"""
