"""The telemetry on P4 switches: P4Runtime (BMv2), BF Runtime (Tofino), and the P4 toolchain (p4c, BMv2)."""
