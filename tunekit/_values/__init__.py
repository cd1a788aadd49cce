"""Plain values that outlive a tune: outcomes, records, cache rows, committed-record and trial-log models."""
