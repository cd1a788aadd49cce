"""Clients for real devices: ``cpu`` (numpy on the host) and ``opencl`` (pyopencl, extra ``opencl``)."""
