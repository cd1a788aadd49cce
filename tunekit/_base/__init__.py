"""The lowest layer: errors, settings, atomic files, locks and paths; it imports nothing else of tunekit."""
