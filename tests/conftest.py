"""Hypothesis profiles: under CI (the CI variable set, as .ci/run does) every run draws the same examples, so a
red build reproduces; elsewhere each run draws new ones, so local runs keep searching. A failure prints the blob
that replays it (@reproduce_failure)."""

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("dev", print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "dev")
