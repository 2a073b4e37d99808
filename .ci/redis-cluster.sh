#!/usr/bin/env bash
# redis-cluster.sh start|stop DIR [FIRST_PORT]
#
# Starts (or stops) a Redis Cluster of 6 nodes, 3 masters and 3 replicas, on
# 127.0.0.1 ports FIRST_PORT..FIRST_PORT+5 (default 7100), each node with its
# own directory, config file and pid file under DIR. AOF everysec and
# cluster-node-timeout 5000 ms, as a deployment would run it; a replica may
# take over however long it was cut off (cluster-replica-validity-factor 0),
# and start returns once every replica has synced with its master.
#
# start prints the export line for the tests, and writes it to DIR/env:
#   export DEDUPE_REDIS_CLUSTER_ADDRS=127.0.0.1:7100,...
# stop kills only the processes whose pid files are in DIR (a node a test
# restarted writes the same pid file), then removes nothing: DIR is the
# caller's.
set -euo pipefail

cmd=${1:-}
dir=${2:-}
first=${3:-7100}
if [[ -z $cmd || -z $dir ]]; then
	echo "usage: $0 start|stop DIR [FIRST_PORT]" >&2
	exit 2
fi
ports=()
for i in 0 1 2 3 4 5; do ports+=($((first + i))); done

stop() {
	local pid
	for p in "${ports[@]}"; do
		[[ -f $dir/$p/redis.pid ]] || continue
		pid=$(cat "$dir/$p/redis.pid")
		# A node stopped with SIGSTOP by a test must be able to exit.
		kill -CONT "$pid" 2>/dev/null || true
		kill -9 "$pid" 2>/dev/null || true
		rm -f "$dir/$p/redis.pid"
	done
}

start() {
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	local addrs=() p
	for p in "${ports[@]}"; do
		if redis-cli -h 127.0.0.1 -p "$p" ping >/dev/null 2>&1; then
			echo "port $p is taken; pick another FIRST_PORT" >&2
			stop
			exit 1
		fi
		mkdir -p "$dir/$p"
		rm -f "$dir/$p/nodes.conf" "$dir/$p"/appendonly* "$dir/$p/dump.rdb"
		rm -rf "$dir/$p/appendonlydir"
		cat >"$dir/$p/redis.conf" <<CONF
port $p
bind 127.0.0.1
dir $dir/$p
daemonize yes
pidfile $dir/$p/redis.pid
logfile $dir/$p/redis.log
cluster-enabled yes
cluster-config-file nodes.conf
cluster-node-timeout 5000
cluster-announce-ip 127.0.0.1
cluster-replica-validity-factor 0
appendonly yes
appendfsync everysec
save ""
CONF
		redis-server "$dir/$p/redis.conf"
		addrs+=("127.0.0.1:$p")
	done
	for p in "${ports[@]}"; do
		for _ in $(seq 100); do
			redis-cli -h 127.0.0.1 -p "$p" ping >/dev/null 2>&1 && break
			sleep 0.1
		done
	done
	redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes >"$dir/create.log"
	for p in "${ports[@]}"; do
		for _ in $(seq 300); do
			redis-cli -h 127.0.0.1 -p "$p" cluster info 2>/dev/null | grep -q 'cluster_state:ok' && break
			sleep 0.1
		done
		redis-cli -h 127.0.0.1 -p "$p" cluster info | grep -q 'cluster_state:ok' || {
			echo "node $p: cluster state not ok" >&2
			stop
			exit 1
		}
	done
	# Every replica must have finished its first sync: a replica that never
	# synced cannot take over a master the tests kill.
	for p in "${ports[@]}"; do
		redis-cli -h 127.0.0.1 -p "$p" info replication | grep -q '^role:slave' || continue
		for _ in $(seq 600); do
			redis-cli -h 127.0.0.1 -p "$p" info replication | grep -q '^master_link_status:up' && break
			sleep 0.1
		done
		redis-cli -h 127.0.0.1 -p "$p" info replication | grep -q '^master_link_status:up' || {
			echo "replica $p: never synced with its master" >&2
			stop
			exit 1
		}
	done
	local list
	list=$(IFS=,; echo "${addrs[*]}")
	echo "export DEDUPE_REDIS_CLUSTER_ADDRS=$list" | tee "$dir/env"
}

case $cmd in
start) start ;;
stop) stop ;;
*)
	echo "usage: $0 start|stop DIR [FIRST_PORT]" >&2
	exit 2
	;;
esac
