"""The names of the real-trace formats `--workload_type` accepts (a module of its own so that the command line can
list and check them without importing the loaders, which need pandas)."""

TRACE_FORMATS = (
    "google",
    "alibaba",
    "alibaba-openb",
    "alibaba-pai",
    "alibaba-2017",
    "itp",
    "philly",
    "helios",
    "swf",
)
