#!/bin/bash
# timeout: 600
# Both of criu's ways to catch a task leaving the parasite, on any host: a
# small memhog is dumped and restored eagerly, lazily with our daemon and
# lazily with stock `criu lazy-pages`, every word checked each time, once with
# CRIU_FAULT=130 (FI_NO_BREAKPOINTS: the PTRACE_SYSCALL fallback, forced) and
# once with criu's own choice (CRIU_FAULT unset, whatever the caller set: the
# kerndat probe of criu-patches/0006 must pick the path that works).  The
# forced fallback runs first, so a host whose debug registers never fire
# (with a criu lacking the probe) still shows it working before the own-
# choice dump hits its bound.
. "$(dirname "$0")/../lib/lazy.sh"

d=$(scratch breakpoint-paths)
LAZY_DIR=$d
at_exit lazy_cleanup
caller_fault=${CRIU_FAULT-}

# one MODE: dump once, restore three ways from the same images
one() {
	local mode=$1 pid img=$d/$1/img
	mkdir -p "$d/$mode"
	pid=$(start_memhog "$d/$mode" -m 8 -f -t 1) || { fail "bp-$mode" "memhog did not start"; return; }
	if criu_dump "$pid" "$img"; then
		pass "bp-$mode-dump"
	else
		fail "bp-$mode-dump" "criu dump failed: $(first_err "$img/dump.log")"
		kill_memhogs "$d/$mode"
		return
	fi
	if criu_restore eager "$img" -d; then
		pass "bp-$mode-eager-restore"
		check_memhog "bp-$mode-eager-memory" "$d/$mode"
	else
		fail "bp-$mode-eager-restore" "criu restore failed: $(first_err "$img/restore-eager.log")"
	fi
	kill_memhogs "$d/$mode"
	LAZY_DIR=$d/$mode
	both_daemons "bp-$mode-lazy" "$img" "$d/$mode" check_memhog
	LAZY_DIR=$d
}

export CRIU_FAULT=130
one fallback
unset CRIU_FAULT
one own-choice
[ -n "$caller_fault" ] && echo "    (CRIU_FAULT=$caller_fault from the caller was set aside for the own-choice run)"
finish
