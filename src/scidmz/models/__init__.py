"""scidmz.models"""
