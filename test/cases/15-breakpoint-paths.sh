#!/bin/bash
# timeout: 600
# Both of criu's ways to catch a task leaving the parasite, on any host: a
# small memhog is dumped and restored eagerly, lazily with our daemon and
# lazily with stock `criu lazy-pages`, every word checked each time, once with
# CRIU_FAULT=130 (FI_NO_BREAKPOINTS: the PTRACE_SYSCALL fallback, forced) and
# once with criu's own choice (CRIU_FAULT unset, whatever the caller set: the
# kerndat probe of criu-patches/0006 must pick the path that works).  The
# forced fallback runs first, so a host whose debug registers never fire
# (with a criu lacking the probe) still shows it working; there the own-
# choice leg is skipped with the reason while criu has no probe (see below).
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
# criu's own choice needs its probe where breakpoints do not fire: without the
# probe (criu check says unknown feature) on such a host (our probe says so)
# it would hang, which is no news: skipped with the reason until
# criu-patches/0006 is in.  BP_OWN_CHOICE=always runs it anyway.
run_bounded -o "$d/probe.out" 30 hwbp-probe "$d/probe.out" "$PROGS/hwbp-probe" -t 5
probe_rc=$?
run_bounded -o "$d/criu-check.out" 60 "criu check --feature hw_breakpoints" "$d/criu-check.out" \
	"$CRIU" check --feature hw_breakpoints
if [ "${BP_OWN_CHOICE:-}" != always ] && [ $probe_rc -eq 1 ] && grep -qi 'unknown feature' "$d/criu-check.out"; then
	skip bp-own-choice "breakpoints do not fire here ($(head -n1 "$d/probe.out")) and this criu has no probe for it (criu check: $(grep -m1 -i 'unknown feature' "$d/criu-check.out")): its own choice would hang until criu-patches/0006"
else
	one own-choice
fi
[ -n "$caller_fault" ] && echo "    (CRIU_FAULT=$caller_fault from the caller was set aside for the own-choice run)"
finish
