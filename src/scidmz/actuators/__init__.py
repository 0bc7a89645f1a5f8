"""scidmz.actuators"""
