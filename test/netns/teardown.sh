#!/bin/sh
# teardown.sh — remove everything setup.sh made (same NETNS_PREFIX): the
# processes left in the hosts, their namespaces and links, the uplink, the
# per-host files and mounts. Safe to run at any time, any number of times;
# exits 1 naming what it could not remove.
P=${NETNS_PREFIX:-gompi}
RUN=/run/$P-netns-hosts
mkdir -p "$RUN"
exec 9>"$RUN/lock"
flock 9
for round in 1 2 3; do
	for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$P-"); do
		ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
	done
	sleep 0.05
done
for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$P-"); do
	ip netns del "$ns"
	rm -rf "/etc/netns/$ns"
done
ip link del $P-up 2>/dev/null
for f in "$RUN"/ns/*; do
	[ -e "$f" ] || continue
	umount "$f" 2>/dev/null
	rm -f "$f"
done
umount "$RUN/shm" 2>/dev/null
rm -rf "$RUN/ns" "$RUN/shm"
left=$(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$P-"; ip link show $P-up 2>/dev/null | head -1; ls -d /etc/netns/$P-* 2>/dev/null)
rm -f "$RUN/lock"
rmdir "$RUN" 2>/dev/null
if [ -n "$left" ]; then
	echo "teardown.sh: left behind: $left" >&2
	exit 1
fi
