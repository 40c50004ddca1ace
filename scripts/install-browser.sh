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

if [ "$(id -u)" -eq 0 ]; then
    SUDO=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=(sudo -n)
else
    echo "install-browser: $CHROMIUM is missing and this user cannot install packages; run as root:" >&2
    echo "    apt-get update && apt-get install -y --no-install-recommends chromium" >&2
    echo "install-browser: the browser tests will be skipped until then" >&2
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-browser: no apt-get here; install Chromium at $CHROMIUM by hand (the browser tests skip until then)" >&2
    exit 0
fi

export DEBIAN_FRONTEND=noninteractive
echo "install-browser: installing Debian's chromium"
"${SUDO[@]}" apt-get update -q
"${SUDO[@]}" apt-get install -y -q --no-install-recommends chromium
"$CHROMIUM" --version 2>/dev/null || true
