#!/bin/bash
# timeout: 120
# Do ptrace hardware breakpoints fire on this host?  The suite's own probe
# (test/progs/hwbp-probe.c) answers, and both other answers must agree with
# it: `criu check --feature hw_breakpoints` (criu-patches/0006: exit 0 when
# they fire) and the "hw_breakpoints" fact of `lazyrestore check --json`.
# Either is skipped, with the reason, while it does not exist yet.
. "$(dirname "$0")/../lib/common.sh"

d=$(scratch hwbp-probe)
run_bounded -o "$d/probe.out" 30 "hwbp-probe" "$d/probe.out" "$PROGS/hwbp-probe" -t 5
rc=$?
probe=$(head -n1 "$d/probe.out")
case $rc/$probe in
"0/fires: "*) fires=yes ;;
"1/does not fire: "*) fires=no ;;
*)
	fail hwbp-probe "status $rc: ${probe:-no output}"
	finish
	;;
esac
pass "hwbp-probe ($probe)"

# criu check --feature hw_breakpoints
run_bounded -o "$d/criu-check.out" 60 "criu check --feature hw_breakpoints" "$d/criu-check.out" \
	"$CRIU" check --feature hw_breakpoints
rc=$?
if grep -qi 'unknown feature' "$d/criu-check.out"; then
	skip hwbp-criu-check-agrees "criu has no hw_breakpoints feature yet (criu-patches/0006): $(grep -m1 -i 'unknown feature' "$d/criu-check.out")"
else
	criu=no
	[ $rc -eq 0 ] && criu=yes
	if [ $criu = $fires ]; then
		pass "hwbp-criu-check-agrees (fires: $fires)"
	else
		fail hwbp-criu-check-agrees "criu check --feature hw_breakpoints exits $rc ($(tail -n1 "$d/criu-check.out")), the probe says: $probe"
	fi
fi

# lazyrestore check --json: {"facts": [{"name": "hw_breakpoints", "ok": BOOL, ...}, ...]}
run_bounded -o "$d/check.json" 60 "lazyrestore check --json" "$d/check.json" "$LAZYRESTORE" check --json
rc=$?
if grep -q "unknown command 'check'" "$d/check.json"; then
	skip hwbp-lazyrestore-check-agrees "lazyrestore has no check command yet: $(grep -m1 "unknown command" "$d/check.json")"
elif out=$(/usr/bin/python3 - "$d/check.json" "$fires" <<'PY'
import json, sys
try:
    facts = json.load(open(sys.argv[1]))["facts"]
    fact = [f for f in facts if f.get("name") == "hw_breakpoints"]
except (ValueError, KeyError, TypeError) as e:
    print("no facts list in its JSON: %r" % e)
    sys.exit(1)
if len(fact) != 1 or not isinstance(fact[0].get("ok"), bool):
    print("want one hw_breakpoints fact with a boolean ok, got %r" % fact)
    sys.exit(1)
ok = fact[0]["ok"]
if ok != (sys.argv[2] == "yes"):
    print("it says ok=%s (%r), the probe says %s" % (ok, fact[0].get("value"), "fires" if sys.argv[2] == "yes" else "does not fire"))
    sys.exit(1)
print("ok=%s" % ok)
PY
); then
	pass "hwbp-lazyrestore-check-agrees ($out, status $rc)"
else
	fail hwbp-lazyrestore-check-agrees "$out"
fi
finish
