#!/usr/bin/env bash
# `make test` on a busy machine: two CPU-bound loops run beside it, as on a
# noisy 2-core CI box, so that a test that passes only on an idle machine
# (a fixed sleep, a rate sized for a fast box) shows up here first. The loops
# end with the script whatever happens (success, failure, Ctrl-C, SIGTERM);
# it prints the elapsed time and exits with the tests' exit code.
#
#   TEST_UNDER_LOAD_CMD    what runs (default "make test"); e.g. "true" for a
#                          dry run, or "go test -count=1 ./bridge/..."
#   TEST_UNDER_LOAD_LOOPS  how many CPU-bound loops (default 2)
set -uo pipefail
cd "$(dirname "$0")/.."

cmd=${TEST_UNDER_LOAD_CMD:-make test}
loops=${TEST_UNDER_LOAD_LOOPS:-2}
case $loops in
'' | *[!0-9]*)
	echo "test-under-load: TEST_UNDER_LOAD_LOOPS=$loops: want a number" >&2
	exit 2
	;;
esac

burners=()
test_pid=""

# stop ends the loops (and the tests, when they still run) and waits for them.
stop() {
	trap - EXIT INT TERM
	if [ -n "$test_pid" ] && kill -0 "$test_pid" 2>/dev/null; then
		kill -TERM "$test_pid" 2>/dev/null
		wait "$test_pid" 2>/dev/null
	fi
	for p in "${burners[@]}"; do
		kill -KILL "$p" 2>/dev/null
	done
	for p in "${burners[@]}"; do
		wait "$p" 2>/dev/null
	done
}
trap stop EXIT
trap 'echo "test-under-load: interrupted" >&2; exit 130' INT
trap 'echo "test-under-load: terminated" >&2; exit 143' TERM

for _ in $(seq "$loops"); do
	sh -c 'while :; do :; done' &
	burners+=("$!")
done
echo "test-under-load: $loops CPU-bound loops (pids ${burners[*]:-none}) beside: $cmd" >&2

SECONDS=0
# In the background, so that a signal to the script is handled at once
# (bash runs its traps only between commands, and wait is one).
bash -c "$cmd" &
test_pid=$!
wait "$test_pid"
rc=$?
test_pid=""
elapsed=$SECONDS
printf 'test-under-load: "%s" exited %d after %dm%02ds beside %d CPU-bound loops\n' \
	"$cmd" "$rc" $((elapsed / 60)) $((elapsed % 60)) "$loops" >&2
exit "$rc"
