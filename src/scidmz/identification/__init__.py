"""scidmz.identification"""
