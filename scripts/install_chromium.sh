#!/bin/sh
# Install headless Chromium from Debian's packages, for the test that opens report.html in a browser
# (tests/test_run_figures.py, test_report_renders_in_headless_chromium; it is skipped, with the reason, when no
# chromium binary is on PATH). Needs root: run it as root or with sudo. Debian 12 (bookworm) and later.
#   sudo sh scripts/install_chromium.sh
set -eu
if [ "$(id -u)" -ne 0 ]; then
    echo "error: installing packages needs root: run 'sudo sh $0'" >&2
    exit 2
fi
apt-get update
apt-get install -y --no-install-recommends chromium
chromium --version
