"""scidmz.tuning"""
