#!/bin/bash
# timeout: 240
# Lazy restore of memhog (several VMAs with known bytes, a fork child, two
# threads) served by stock `criu lazy-pages` and by ours; every process checks
# every word, and each daemon must exit 0 once all memory is in.
. "$(dirname "$0")/../lib/lazy.sh"

d=$(scratch lazy-memhog)
LAZY_DIR=$d
at_exit lazy_cleanup

pid=$(start_memhog "$d" -m 64 -f -t 2) || { fail lazy-memhog "memhog did not start"; finish; }
criu_dump "$pid" "$d/img" || { fail lazy-memhog-dump "$(first_err "$d/img/dump.log")"; finish; }
both_daemons lazy-memhog "$d/img" "$d" check_memhog

# The probes taken while other tasks run.  The sibling probe (may prefetch
# workers copy beside faults?; --fault-cpu any, so that it runs): two busy
# loops make faults "alone" as slow as beside its spinner, so a "share" then
# is not trusted (workers wait), nor kept for the boot.  The fault-CPU probe
# (follow the faulting thread?): a busy loop beside the server on the
# faulting CPU slows it, so "any CPU" then is not kept for the boot either;
# "follow" may be.  The boot's answers are moved aside meanwhile and put back.
cache=/run/lazyrestore/workers-beside-faults
fcache=/run/lazyrestore/fault-cpu
[ -e "$cache" ] && mv "$cache" "$d/probe.saved"
[ -e "$fcache" ] && mv "$fcache" "$d/fprobe.saved"
bounded_start "busy loop 1" /dev/null timeout 20 sh -c 'while :; do :; done'
hog1=$BOUNDED_PID
bounded_start "busy loop 2" /dev/null timeout 20 sh -c 'while :; do :; done'
hog2=$BOUNDED_PID
bounded_start "lazyrestore lazy-pages (probe under load)" "$d/probe.log" \
	"$LAZYRESTORE" lazy-pages -D "$d/img" -o "$d/probe.log" -v3 --fault-cpu any
lp=$BOUNDED_PID
wait_until -k "$lp" 30 "the probe's log line" "$d/probe.log" grep -q 'prefetch workers:' "$d/probe.log"
kill -KILL "$lp" 2>/dev/null
bounded_reap 10 "$lp"
bounded_start "lazyrestore lazy-pages (fault-CPU probe under load)" "$d/fprobe.log" \
	"$LAZYRESTORE" lazy-pages -D "$d/img" -o "$d/fprobe.log" -v3
lp=$BOUNDED_PID
wait_until -k "$lp" 30 "the fault-CPU probe's log line" "$d/fprobe.log" grep -q 'fault thread:' "$d/fprobe.log"
kill -KILL "$lp" "$hog1" "$hog2" 2>/dev/null
bounded_reap 10 "$lp"
bounded_reap 10 "$hog1"
bounded_reap 10 "$hog2"
line=$(grep -m1 'prefetch workers:' "$d/probe.log")
kept=$([ -e "$cache" ] && sed -n 2p "$cache")
if [[ $line == *"workers wait for a calm spell"* ]] && [ "$kept" != 1 ]; then
	pass "lazy-probe-under-load: ${line#*prefetch workers: }"
else
	fail lazy-probe-under-load "'${line:-no line}', kept for the boot: ${kept:-nothing}"
fi
fline=$(grep -m1 'fault thread:' "$d/fprobe.log")
fkept=$([ -e "$fcache" ] && sed -n 2p "$fcache")
if { [[ $fline == *"follows the faulting thread's CPU"* ]] && [ "$fkept" = 1 ]; } ||
	{ [[ $fline == *"runs on any CPU"* ]] && [ -z "$fkept" ]; }; then
	pass "lazy-fault-cpu-probe-under-load: ${fline#*fault thread: }, kept: ${fkept:-nothing}"
else
	fail lazy-fault-cpu-probe-under-load "'${fline:-no line}', kept for the boot: ${fkept:-nothing}"
fi
rm -f "$cache" "$fcache"
[ -e "$d/probe.saved" ] && mv "$d/probe.saved" "$cache"
[ -e "$d/fprobe.saved" ] && mv "$d/fprobe.saved" "$fcache"


finish
