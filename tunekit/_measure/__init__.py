"""Measuring candidates on a device: the client protocol, runners, the schedule, the gate and isolation."""
