#!/usr/bin/env bash
# N `kvlab serve` replicas on free loopback ports behind nginx on --port, in
# the foreground; SIGINT or SIGTERM stops nginx and every replica.
#
#   scripts/serve-cluster.sh --replicas N --port P [--routing prefix|round-robin]
#                            [--dir DIR] [-- kvlab serve options...]
#
# --routing prefix (default): requests that start alike (prompt, or the
#   conversation's first messages) go to the same replica, so its prefix
#   cache hits; a client's X-Session-Affinity header overrides the key
#   (deploy/affinity.js). round-robin: nginx's default, for comparison.
# --dir: where the generated nginx config, the logs, `replicas` (one
#   "INDEX PID PORT" line per replica) and `targets.json` (the replicas for
#   Prometheus, deploy/prometheus.yml) go; kept afterwards. Default: a temp
#   dir, removed on exit.
# KVLAB_BIN picks the binary (default build/kvlab).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
KVLAB_BIN=${KVLAB_BIN:-$ROOT/build/kvlab}
JS_MODULE=${KVLAB_NGINX_JS_MODULE:-/usr/lib/nginx/modules/ngx_http_js_module.so}  # Debian's libnginx-mod-http-js

usage() { sed -n '2,17p' "$0" >&2; exit 2; }
replicas="" port="" routing=prefix dir=""
while (($#)); do
  case $1 in
    --replicas) replicas=$2; shift 2 ;;
    --port) port=$2; shift 2 ;;
    --routing) routing=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --) shift; break ;;
    *) usage ;;
  esac
done
[[ $replicas =~ ^[1-9][0-9]*$ && $port =~ ^[0-9]+$ ]] || usage
case $routing in
  prefix) balance='hash $affinity_key consistent;' ;;
  round-robin) balance='# round robin (nginx default)' ;;
  *) usage ;;
esac
[[ -x $KVLAB_BIN ]] || { echo "serve-cluster: $KVLAB_BIN not found (build first or set KVLAB_BIN)" >&2; exit 1; }
[[ -f $JS_MODULE ]] || { echo "serve-cluster: $JS_MODULE not found (apt-get install libnginx-mod-http-js)" >&2; exit 1; }

keep_dir=1
if [[ -z $dir ]]; then dir=$(mktemp -d /tmp/kvlab-cluster.XXXXXX); keep_dir=0; fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
: >"$dir/replicas"

pids=()
cleanup() {
  trap - EXIT INT TERM
  # TERM first (replicas end their streams and exit), KILL what is left after 10 s.
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for _ in $(seq 50); do
    alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    ((alive)) || break
    sleep 0.2
  done
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  ((keep_dir)) || rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

servers="" targets=""
for ((i = 0; i < replicas; i++)); do
  p=$(free_port)
  "$KVLAB_BIN" serve --host 127.0.0.1 --port "$p" "$@" >"$dir/replica-$i.log" 2>&1 &
  pids+=($!)
  echo "$i $! $p" >>"$dir/replicas"
  servers+="    server 127.0.0.1:$p max_fails=1 fail_timeout=5s;"$'\n'
  targets+="${targets:+,}{\"targets\":[\"127.0.0.1:$p\"],\"labels\":{\"replica\":\"$i\"}}"
done
echo "[$targets]" >"$dir/targets.json"

for ((i = 0; i < replicas; i++)); do
  read -r _ pid p < <(sed -n "$((i + 1))p" "$dir/replicas")
  until curl -sf -o /dev/null "http://127.0.0.1:$p/health"; do
    kill -0 "$pid" 2>/dev/null || { echo "serve-cluster: replica $i exited:" >&2; cat "$dir/replica-$i.log" >&2; exit 1; }
    sleep 0.2
  done
done

# nginx workers drop root to nobody, who must reach the temp dir.
user=""
if ((EUID == 0)); then user="user nobody nogroup;"; chmod 755 "$dir"; fi
conf=$(<"$ROOT/deploy/nginx.conf.template")
conf=${conf//@JS_MODULE@/$JS_MODULE}
conf=${conf//@USER@/$user}
conf=${conf//@DIR@/$dir}
conf=${conf//@DEPLOY@/$ROOT/deploy}
conf=${conf//@BALANCE@/$balance}
conf=${conf//@SERVERS@/$servers}
conf=${conf//@PORT@/$port}
printf '%s\n' "$conf" >"$dir/nginx.conf"
nginx -e "$dir/error.log" -p "$dir" -c "$dir/nginx.conf" &
nginx_pid=$!
pids=("$nginx_pid" "${pids[@]}")
until curl -sf -o /dev/null "http://127.0.0.1:$port/health"; do
  kill -0 "$nginx_pid" 2>/dev/null || { echo "serve-cluster: nginx exited:" >&2; cat "$dir/error.log" >&2; exit 1; }
  sleep 0.2
done
echo "serve-cluster: ready on http://127.0.0.1:$port ($replicas replicas, $routing routing, state in $dir)" >&2

# Replicas may die (a crash, a test killing one): nginx routes around them.
# The cluster runs until nginx stops or a signal ends this script.
wait "$nginx_pid"
