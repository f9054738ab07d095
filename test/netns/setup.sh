#!/bin/sh
# setup.sh HOST... — simulated hosts on this machine, for multi-host tests:
# one network namespace per host (its own interfaces, ports and loopback),
# joined by veth to a bridge in a namespace of its own, with a host name (UTS
# namespace), System V IPC and /dev/shm of its own; the root namespace sits
# on the bridge as NET.1 (the "uplink"), so that a launcher there is
# reachable from the hosts under this machine's host name. Idempotent.
# Needs root and iproute2. Settings: NETNS_PREFIX (default gompi), NETNS_NET
# (first three octets, default 10.251.0). Undo with teardown.sh.
set -eu
P=${NETNS_PREFIX:-gompi}
NET=${NETNS_NET:-10.251.0}
RUN=/run/$P-netns-hosts
[ $# -gt 0 ] || { echo "usage: setup.sh HOST..." >&2; exit 2; }
mkdir -p "$RUN/ns" "$RUN/shm"
exec 9>"$RUN/lock"
flock 9

mac() { printf '02:00:%02x:%02x:%02x:%02x' $(echo "$1" | tr . ' '); }

sw=$P-sw
[ -e /run/netns/$sw ] || ip netns add $sw
ip -n $sw link set lo up
ip -n $sw link show br0 >/dev/null 2>&1 || ip -n $sw link add br0 type bridge
ip -n $sw link set br0 up
# Bridged frames must not meet the machine's firewall.
ip netns exec $sw sh -c 'for f in /proc/sys/net/bridge/bridge-nf-call-*; do [ -e "$f" ] && echo 0 > "$f"; done; true'

ip link show $P-up >/dev/null 2>&1 || ip link add $P-up type veth peer name uplink netns $sw
ip link set $P-up address "$(mac $NET.1)"
ip addr replace $NET.1/24 dev $P-up
ip link set $P-up up
ip -n $sw link set uplink master br0 up

mountpoint -q "$RUN/shm" || mount -t tmpfs -o size=4g,mode=755 tmpfs "$RUN/shm"

head=$(hostname)
hosts=$(printf '127.0.0.1 localhost\n%s.1 head %s\n' "$NET" "$head")
i=11
for h in "$@"; do
	hosts=$(printf '%s\n%s.%d %s\n' "$hosts" "$NET" $i "$h")
	i=$((i + 1))
done

i=11
for h in "$@"; do
	ns=$P-$h
	addr=$NET.$i
	i=$((i + 1))
	[ -e /run/netns/$ns ] || ip netns add $ns
	if ! ip -n $sw link show p-$h >/dev/null 2>&1; then
		ip -n $ns link del eth0 2>/dev/null || true
		ip -n $sw link add p-$h type veth peer name eth0 netns $ns
	fi
	ip -n $sw link set p-$h master br0 up
	ip -n $ns link set lo up
	ip -n $ns link set eth0 address "$(mac $addr)"
	ip -n $ns addr replace $addr/24 dev eth0
	ip -n $ns link set eth0 up
	mkdir -p /etc/netns/$ns
	printf '%s\n' "$hosts" > /etc/netns/$ns/hosts
	echo "$h" > /etc/netns/$ns/hostname
	: > /etc/netns/$ns/resolv.conf
	# A host name and an IPC space per host, kept by bind mounts on files.
	for kind in uts ipc; do
		f=$RUN/ns/$h.$kind
		[ -e "$f" ] || touch "$f"
	done
	mountpoint -q "$RUN/ns/$h.uts" || unshare --uts="$RUN/ns/$h.uts" --ipc="$RUN/ns/$h.ipc" true
	nsenter --uts="$RUN/ns/$h.uts" hostname "$h"
	mkdir -p "$RUN/shm/$h"
	echo "$addr $h"
done
