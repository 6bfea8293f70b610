"""Pure functions over a finished run's records: summary rows, fairness, energy, CSV files and figures. Imports
config and sim only."""
