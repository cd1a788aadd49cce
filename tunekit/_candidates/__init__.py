"""What is tuned: tunables, tunable sets, search spaces, the priority plan and each set's declared options."""
