"""scidmz.telemetry: passive measurements of y(t) (MLC section 3.4, JENKS section 3.1).

Modules (heavy ones import numba/pandas lazily; importing this package is cheap):

constants   the data plane's single source of truth (tables, CRC-32 layouts, thresholds,
            register names, digest formats), mirrored by telemetry_p4/
parse       numba header parser: frames -> per-packet columns + per-reason drop codes
pcap        vectorised pcap/pcapng reader (and a small writer)
capture     live AF_PACKET TPACKET_V3 ring on a mirror interface, kernel drop counters
dataplane   SoftwareDataPlane: the software twin of the P4 program (Algorithms 2, 5, 7,
            SEQ/eACK RTT, Count-Min long flows)
view        DataPlaneView: the 4-call read interface the control plane uses
collector   Collector: Algorithms 3, 4, 6, 8 -> NetworkState + per-flow DataFrame
source      TelemetrySource: NetworkState every T from pcaps (replay) or live taps
run         what `scidmz telemetry replay|capture` does
synth       synthetic tap traffic with known ground truth (tests, benchmark)
p4runtime, bfrt
            switch adapters feeding the same Collector (BMv2 / Tofino)
taps        DataplaneTelemetry: the twin on the netns testbed's mirrored taps, y every T
kernel      KernelCounterTelemetry: y from kernel counters and tcp_info (the testbed's fallback)

The two testbed sources take plain data (``TapPoints``, ``KernelPoints``), never a plant
object; the netns plant composes them (``plant/netns/sources.py``).
"""
