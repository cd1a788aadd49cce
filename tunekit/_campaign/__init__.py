"""Tuning campaigns: a declared list of tunes fanned out to the workers of a Ray cluster, merged into records."""
