"""Tuning and dispatch: the device-scoped Tuner, LocalTuner and committed records."""
