"""Watching tunes: observers, record sinks, live progress, OpenTelemetry, summaries and the report."""
