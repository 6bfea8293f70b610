"""The held-out evaluation behind `--mode report`: evaluation sets, paired statistics against the best heuristic
(and the Student t quantiles every mean CI uses), the report's tables. Imports every layer up to agents."""
