"""scidmz.telemetry"""
