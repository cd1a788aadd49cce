"""Searching a space under a budget: the driver, the strategies and caller-measured objectives."""
