"""The command line: the option parser and its checks, JSON options, run folders and the run modes (eval, compare,
train, report). Imports every layer below it; server/, sweep/ and main.py are the only code above it."""
