#!/usr/bin/env bash
# Install Debian's Chromium for the browser tests (tests/review/test_browser.py). Idempotent.
#
# Playwright drives /usr/bin/chromium; this script never runs `playwright install` (that downloads
# a browser build, which this project's machines cannot fetch). When it cannot install (not root
# and no sudo), it prints the command to run and exits 0: the browser tests then skip with a reason.
set -euo pipefail

CHROMIUM=/usr/bin/chromium

if [ -x "$CHROMIUM" ]; then
    echo "install-browser: $CHROMIUM is already installed"
    exit 0
fi

bash "$(dirname "$0")/apt-install.sh" install-browser chromium "the browser tests will be skipped until then"
"$CHROMIUM" --version 2>/dev/null || true
