#!/bin/bash
# localagent.sh [options] HOST COMMAND... — a launch agent for tests: runs
# COMMAND on this machine as ssh would run it on HOST (arguments joined,
# run by a shell, in a clean environment, exec'd so that the agent's
# process is the command's).
while [[ "$1" == -* ]]; do shift; done
shift
cd "$HOME" 2>/dev/null || cd /
exec env -i HOME="$HOME" PATH=/usr/bin:/bin /bin/bash -c "$*"
