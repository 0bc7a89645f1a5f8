"""scidmz.telemetry: passive measurements of y(t) (MLC section 3.4, JENKS section 3.1), by room.

Modules (heavy ones import numba/pandas lazily; importing this package is cheap):

constants      the data plane's single source of truth (tables, CRC-32 layouts, thresholds,
               register names, digest formats), mirrored by telemetry_p4/ and ebpf/
view           DataPlaneView: the 4-call read interface the control plane uses
collector      Collector: Algorithms 3, 4, 6, 8 -> NetworkState + per-flow DataFrame
controlplane   the control plane's per-period arithmetic (numba), shared by the twin
run            what `scidmz telemetry replay|capture` does

twin/          the software twin of the P4 program: parse (frames -> per-packet columns),
               algorithms (Algorithms 2, 5, 7 in numba), layout (its index constants),
               dataplane (SoftwareDataPlane), source (TelemetrySource: y every T from pcaps
               or live taps)
sources/       where frames and counters come from: pcap (pcap/pcapng reader and writer),
               capture (live AF_PACKET ring), taps (the twin on the netns testbed's taps),
               counters (KernelCounterTelemetry: kernel counters and tcp_info), synth
               (synthetic tap traffic with known ground truth)
p4/            the switches: p4runtime (BMv2 simple_switch_grpc), p4info (P4Runtime protobufs),
               bfrt (Tofino, BF Runtime), toolchain (p4c, p4test, BMv2's frame player)
ebpf/          the same algorithms as eBPF programs on a Linux router

The two testbed sources take plain data (``TapPoints``, ``KernelPoints``), never a plant
object; the netns plant composes them (``plant/netns/sources.py``).
"""
