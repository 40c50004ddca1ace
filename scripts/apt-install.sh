#!/usr/bin/env bash
# Install one of Debian's packages for the tests, or say how: `apt-install.sh <label> <package> <without it>`.
#
# Used by install-browser.sh and install-redis.sh once they found their program missing. As root it runs apt-get;
# otherwise through `sudo -n` when that needs no password. When it cannot install (not root and no sudo, or no
# apt-get), it prints the command to run and "<without it>" (what the tests do then) and exits 0: the tests that
# need the package skip with a reason.
set -euo pipefail

LABEL=$1 PACKAGE=$2 WITHOUT=$3

if [ "$(id -u)" -eq 0 ]; then
    SUDO=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=(sudo -n)
else
    echo "$LABEL: $PACKAGE is missing and this user cannot install packages; run as root:" >&2
    echo "    apt-get update && apt-get install -y --no-install-recommends $PACKAGE" >&2
    echo "$LABEL: $WITHOUT" >&2
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "$LABEL: no apt-get here; install $PACKAGE by hand ($WITHOUT)" >&2
    exit 0
fi

export DEBIAN_FRONTEND=noninteractive
echo "$LABEL: installing Debian's $PACKAGE"
"${SUDO[@]}" apt-get update -q
"${SUDO[@]}" apt-get install -y -q --no-install-recommends "$PACKAGE"
