"""The software twin of the P4 telemetry data plane: parser, per-packet algorithms, the data plane and its ``TelemetrySource``."""
