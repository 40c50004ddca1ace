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

bash "$(dirname "$0")/apt-install.sh" install-redis redis-server "the Celery tests will be skipped until then"
redis-server --version 2>/dev/null || true
