#!/bin/sh
# agent.sh [ssh options] [user@]HOST COMMAND... — run COMMAND on a host made
# by setup.sh the way ssh would: its arguments joined and run by a shell,
# in $HOME, with a clean environment, the host's /dev/shm; exit 255 when
# the host does not exist. The agent's process becomes the command (every
# step execs), so killing it kills the command.
P=${NETNS_PREFIX:-gompi}
RUN=/run/$P-netns-hosts
while [ $# -gt 0 ]; do
	case $1 in
	-[bcDEeFIiJLlmOopQRSWw]) shift 2 ;;
	-*) shift ;;
	*) break ;;
	esac
done
[ $# -gt 0 ] || { echo "usage: agent.sh HOST COMMAND..." >&2; exit 255; }
h=${1#*@}
shift
if [ ! -e "/run/netns/$P-$h" ]; then
	echo "agent.sh: no simulated host $h (prefix $P)" >&2
	exit 255
fi
exec ip netns exec "$P-$h" nsenter --uts="$RUN/ns/$h.uts" --ipc="$RUN/ns/$h.ipc" -- \
	/bin/sh -c 'mount --bind "$1" /dev/shm || exit 255
		p=$2; shift 2
		cd "${HOME:-/}" 2>/dev/null || cd /
		exec env -i HOME="${HOME:-/}" USER="${USER:-root}" LOGNAME="${USER:-root}" SHELL=/bin/bash \
			PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin NETNS_PREFIX="$p" /bin/bash -c "$*"' \
	agent "$RUN/shm/$h" "$P" "$@"
