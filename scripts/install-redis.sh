#!/usr/bin/env bash
# Install Debian's redis-server, the broker of the Celery executor (scripts/workers.sh, tests/test_celery_*.py).
# Idempotent.
#
# Only the binaries are needed: scripts/workers.sh starts its own redis on 127.0.0.1 (the port of the registry's
# execution.celery.broker) and stops it; the Debian service this package may start is not used. When it cannot
# install (not root and no sudo, or no apt-get), it prints the command to run and exits 0: the Celery tests then
# skip with a reason, and `make workers` says redis-server is missing.
set -euo pipefail

if command -v redis-server >/dev/null 2>&1; then
    echo "install-redis: $(command -v redis-server) is already installed ($(redis-server --version | cut -d' ' -f3))"
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    SUDO=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=(sudo -n)
else
    echo "install-redis: redis-server is missing and this user cannot install packages; run as root:" >&2
    echo "    apt-get update && apt-get install -y --no-install-recommends redis-server" >&2
    echo "install-redis: the Celery tests will be skipped until then" >&2
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-redis: no apt-get here; install redis-server (Redis >= 6) by hand (the Celery tests skip until then)" >&2
    exit 0
fi

export DEBIAN_FRONTEND=noninteractive
echo "install-redis: installing Debian's redis-server"
"${SUDO[@]}" apt-get update -q
"${SUDO[@]}" apt-get install -y -q --no-install-recommends redis-server
redis-server --version
