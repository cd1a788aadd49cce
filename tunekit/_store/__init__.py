"""What persists between processes: the cache of winners, tune locks, failure memory and trial logs."""
