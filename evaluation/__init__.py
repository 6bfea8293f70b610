"""`--mode report`: held-out evaluation sets, paired statistics against the best heuristic, the report's files."""
