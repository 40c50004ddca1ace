#!/usr/bin/env bash
# The Celery side of `execution.executor: celery`: a Redis broker on 127.0.0.1 and N Dagster Celery workers.
#
#   scripts/workers.sh start [N]   start redis (when the registry's broker is on this machine) and N workers
#   scripts/workers.sh stop        stop every worker and the redis this script started
#   scripts/workers.sh status      what runs, with pids, the broker and the logs
#
# Settings come from the registry ($CONTEB_CONFIG or conteb.yaml), block execution.celery: broker/backend URLs
# (redis://127.0.0.1:PORT/DB; the port is where redis listens), workers (N), concurrency (steps per worker).
# Workers run `celery -A pipelines.worker:app worker` in the environment this script was started in, which must be
# the run's: the same $CONTEB_CONFIG, $CONTEB_DATA_DIR and $DAGSTER_HOME (default, as in the Makefile:
# .dagster of the repository).
#
# Everything it starts is recorded under $CONTEB_CELERY_DIR (default .cache/celery of the repository): redis.pid,
# redis.log, worker-<i>.pid, worker-<i>.log, env (the settings and environment the workers got). It refuses to
# start twice; `stop` ends only the processes whose pids it recorded (each worker is its own process group: its pool
# processes go with it). Redis keeps nothing on disk (--save '', no AOF): a stopped broker forgets queued steps,
# which a run that is still going then waits for; stop the workers when no run is going.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${CONTEB_BIN:-$ROOT/.venv/bin}"              # the virtual environment's bin (python, celery)
STATE="${CONTEB_CELERY_DIR:-$ROOT/.cache/celery}"
READY_TIMEOUT_S="${CONTEB_WORKER_READY_TIMEOUT_S:-120}"
STOP_TIMEOUT_S="${CONTEB_WORKER_STOP_TIMEOUT_S:-20}"
export DAGSTER_HOME="${DAGSTER_HOME:-$ROOT/.dagster}"
export DAGSTER_MODULE_NAME="${DAGSTER_MODULE_NAME:-pipelines.definitions}"
export DO_NOT_TRACK=1

say() { echo "workers: $*"; }
die() { echo "workers: $*" >&2; exit 1; }

alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }
pid_in() { [ -f "$1" ] && tr -dc '0-9' <"$1" || true; }

load_settings() {
    # KEY=value lines from the registry (python -m pipelines.celery), read without eval.
    local out key value
    out="$(cd "$ROOT" && "$BIN/python" -m pipelines.celery)" || die "cannot read execution.celery from the registry"
    while IFS='=' read -r key value; do
        case "$key" in
            BROKER_URL | BROKER_HOST | BROKER_PORT | BACKEND_HOST | BACKEND_PORT | WORKERS | CONCURRENCY | QUEUE)
                printf -v "$key" '%s' "$value" ;;
        esac
    done <<<"$out"
}

loopback() { [ "$1" = 127.0.0.1 ] || [ "$1" = localhost ] || [ "$1" = ::1 ]; }

find_redis() {
    REDIS_SERVER="${REDIS_SERVER:-$(command -v redis-server || true)}"
    [ -x "$REDIS_SERVER" ] || die "redis-server not found; install it with scripts/install-redis.sh (Debian: apt-get install redis-server)"
    REDIS_CLI="$(dirname "$REDIS_SERVER")/redis-cli"
    [ -x "$REDIS_CLI" ] || REDIS_CLI="$(command -v redis-cli || true)"
}

redis_ping() { [ -n "${REDIS_CLI:-}" ] && "$REDIS_CLI" -h 127.0.0.1 -p "$BROKER_PORT" ping 2>/dev/null | grep -q PONG; }

start_redis() {
    if ! loopback "$BROKER_HOST"; then
        say "broker $BROKER_HOST:$BROKER_PORT is not on this machine: not starting redis (it must already run there)"
        return
    fi
    if [ "$BACKEND_PORT" != "$BROKER_PORT" ] || ! loopback "$BACKEND_HOST"; then
        die "execution.celery.backend ($BACKEND_HOST:$BACKEND_PORT) must be the broker's redis (127.0.0.1:$BROKER_PORT), another database of it"
    fi
    find_redis
    local pid
    pid="$(pid_in "$STATE/redis.pid")"
    if alive "$pid"; then
        die "redis is already running (pid $pid, port $(cat "$STATE/redis.port" 2>/dev/null)); 'scripts/workers.sh stop' first"
    fi
    rm -f "$STATE/redis.pid" "$STATE/redis.port"
    if redis_ping; then
        die "something already answers on 127.0.0.1:$BROKER_PORT (not started by this script); stop it or change the port of execution.celery.broker"
    fi
    "$REDIS_SERVER" --bind 127.0.0.1 --port "$BROKER_PORT" --protected-mode yes --daemonize yes \
        --pidfile "$STATE/redis.pid" --logfile "$STATE/redis.log" --dir "$STATE" --save '' --appendonly no \
        || die "redis-server did not start; see $STATE/redis.log"
    echo "$BROKER_PORT" >"$STATE/redis.port"
    for _ in $(seq 1 100); do
        redis_ping && break
        sleep 0.1
    done
    redis_ping || { tail -n 20 "$STATE/redis.log" >&2 || true; die "redis on 127.0.0.1:$BROKER_PORT does not answer; see $STATE/redis.log"; }
    say "redis $(pid_in "$STATE/redis.pid") on 127.0.0.1:$BROKER_PORT (log $STATE/redis.log)"
}

start_workers() {
    local count="$1" i pid log
    : >"$STATE/env"
    {
        echo "BROKER_URL=$BROKER_URL"
        echo "WORKERS=$count"
        echo "CONCURRENCY=$CONCURRENCY"
        echo "CONTEB_CONFIG=${CONTEB_CONFIG:-}"
        echo "CONTEB_DATA_DIR=${CONTEB_DATA_DIR:-}"
        echo "DAGSTER_HOME=$DAGSTER_HOME"
    } >>"$STATE/env"
    for i in $(seq 1 "$count"); do
        log="$STATE/worker-$i.log"
        : >"$log"
        # setsid: the worker leads its own process group (its pool processes join it), so stop can end them all.
        (cd "$ROOT" && exec setsid "$BIN/celery" -A pipelines.worker:app worker -Q "$QUEUE" --pool prefork \
            --concurrency "$CONCURRENCY" --prefetch-multiplier 1 -n "conteb-$i@%h" --loglevel INFO \
            --without-gossip --without-mingle </dev/null >>"$log" 2>&1) &
        echo "$!" >"$STATE/worker-$i.pid"
    done
    local deadline=$((SECONDS + READY_TIMEOUT_S))
    for i in $(seq 1 "$count"); do
        pid="$(pid_in "$STATE/worker-$i.pid")"
        log="$STATE/worker-$i.log"
        until grep -q " ready\.$" "$log" 2>/dev/null; do
            if ! alive "$pid"; then
                tail -n 30 "$log" >&2 || true
                stop_all >/dev/null 2>&1 || true
                die "worker $i (pid $pid) exited before it was ready; see $log"
            fi
            if [ "$SECONDS" -ge "$deadline" ]; then
                stop_all >/dev/null 2>&1 || true
                die "worker $i not ready after ${READY_TIMEOUT_S}s; see $log"
            fi
            sleep 0.2
        done
        say "worker conteb-$i pid $pid ready (log $log)"
    done
}

stop_all() {
    # Workers first (TERM: Celery's warm shutdown, all at once), then redis; whatever is left after
    # $STOP_TIMEOUT_S gets SIGKILL: a worker with its whole process group (its pool processes).
    local file pid found=0 pids=() names=()
    for file in "$STATE"/worker-*.pid; do
        [ -e "$file" ] || continue
        found=1
        pid="$(pid_in "$file")"
        if alive "$pid"; then
            kill -TERM "$pid" 2>/dev/null || true
            pids+=("$pid")
            names+=("$(basename "$file" .pid)")
        fi
    done
    local deadline=$((SECONDS + STOP_TIMEOUT_S)) i waiting
    while :; do
        waiting=0
        for pid in "${pids[@]}"; do alive "$pid" && waiting=1; done
        [ "$waiting" = 0 ] || [ "$SECONDS" -ge "$deadline" ] && break
        sleep 0.2
    done
    for i in "${!pids[@]}"; do
        pid="${pids[$i]}"
        if alive "$pid"; then say "${names[$i]} (pid $pid) still running after ${STOP_TIMEOUT_S}s: SIGKILL"; fi
        kill -KILL -- "-$pid" 2>/dev/null || true  # its process group: pool processes left behind, if any
        say "stopped ${names[$i]} (pid $pid)"
    done
    rm -f "$STATE"/worker-*.pid
    if [ -f "$STATE/redis.pid" ]; then
        found=1
        pid="$(pid_in "$STATE/redis.pid")"
        if alive "$pid"; then
            kill -TERM "$pid" 2>/dev/null || true
            deadline=$((SECONDS + STOP_TIMEOUT_S))
            while alive "$pid" && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
            alive "$pid" && { kill -KILL "$pid" 2>/dev/null || true; }
            say "stopped redis (pid $pid)"
        fi
        rm -f "$STATE/redis.pid" "$STATE/redis.port"
    fi
    [ "$found" = 1 ] || say "nothing to stop (no pid files in $STATE)"
}

status() {
    local file pid running=0
    if [ -f "$STATE/redis.pid" ]; then
        pid="$(pid_in "$STATE/redis.pid")"
        if alive "$pid"; then running=1; say "redis pid $pid on 127.0.0.1:$(cat "$STATE/redis.port" 2>/dev/null)";
        else say "redis pid $pid: not running (stale pid file)"; fi
    fi
    for file in "$STATE"/worker-*.pid; do
        [ -e "$file" ] || continue
        pid="$(pid_in "$file")"
        if alive "$pid"; then running=1; say "$(basename "$file" .pid) pid $pid (log ${file%.pid}.log)";
        else say "$(basename "$file" .pid) pid $pid: not running (stale pid file; see ${file%.pid}.log)"; fi
    done
    if [ "$running" = 0 ]; then say "nothing running (state in $STATE)"; return 3; fi
    [ -f "$STATE/env" ] && sed 's/^/workers:   /' "$STATE/env"
    return 0
}

start() {
    mkdir -p "$STATE"
    local file pid
    for file in "$STATE"/worker-*.pid; do
        [ -e "$file" ] || continue
        pid="$(pid_in "$file")"
        alive "$pid" && die "workers are already running ($(basename "$file" .pid) pid $pid); 'scripts/workers.sh stop' first"
        rm -f "$file"
    done
    [ -x "$BIN/celery" ] || die "$BIN/celery not found: install the project first (make venv)"
    load_settings
    local count="${1:-$WORKERS}"
    [[ "$count" =~ ^[1-9][0-9]*$ ]] || die "the number of workers must be a positive integer, not '$count'"
    start_redis
    start_workers "$count"
    say "$count worker(s) on $BROKER_URL; run with execution.executor: celery (e.g. make run), stop with make workers-stop"
}

case "${1:-}" in
    start) shift; start "$@" ;;
    stop) stop_all ;;
    status) status ;;
    *) echo "usage: $0 start [N] | stop | status" >&2; exit 2 ;;
esac
