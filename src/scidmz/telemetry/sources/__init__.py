"""Where the telemetry's input comes from: pcap files, a live capture ring, the testbed's taps, kernel counters, synthetic traffic."""
