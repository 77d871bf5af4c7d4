#!/bin/bash
# timeout: 120
# lazyrestore check: its JSON has every fact, and the facts agree with independent sources
# (sysfs, /proc, uname, /proc/self/status, criu's own check); bad usage is exit status 2.
. "$(dirname "$0")/../lib/common.sh"

d=$(scratch check)
FACTS="userfaultfd userfaultfd_syscall dev_userfaultfd uffd_api uffd_missing_anon uffd_event_fork
uffd_event_remap uffd_event_remove uffd_event_unmap uffd_sigbus uffd_thread_id uffd_move uffd_wp
uffd_wp_async uffd_missing_hugetlbfs uffd_missing_shmem uffd_zeropage uffd_wp_anon pagemap_scan
hw_breakpoints cap_sys_resource pipe_max_size thp_enabled thp_defrag madv_collapse soft_dirty criu
criu_hw_breakpoints"
REQUIRED="userfaultfd uffd_api uffd_missing_anon uffd_event_fork uffd_event_remap uffd_event_remove uffd_event_unmap"

# fact NAME FIELD: one field (ok or value) of one fact of check.json
fact() {
	/usr/bin/python3 -c 'import json, sys
for f in json.load(open(sys.argv[1]))["facts"]:
    if f["name"] == sys.argv[2]:
        v = f[sys.argv[3]]
        print(("true" if v else "false") if isinstance(v, bool) else v)' "$d/check.json" "$1" "$2"
}

start=$SECONDS
env -u CRIU "$LAZYRESTORE" check --json >"$d/check.json" 2>"$d/check.err"
status=$?
elapsed=$((SECONDS - start))
if out=$(/usr/bin/python3 - "$d/check.json" "$FACTS" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
problems = []
if sorted(doc) != ["facts", "host"] or sorted(doc["host"]) != ["cpu", "kernel"]:
    problems.append("top-level keys %s, host keys %s" % (sorted(doc), sorted(doc.get("host", {}))))
names = [f.get("name") for f in doc["facts"]]
for f in doc["facts"]:
    if sorted(f) != ["consequence", "name", "ok", "value"] or not isinstance(f["ok"], bool) \
       or not isinstance(f["value"], str) or not f["consequence"]:
        problems.append("malformed fact %r" % f)
for n in sys.argv[2].split():
    if names.count(n) != 1:
        problems.append("fact %s appears %d times" % (n, names.count(n)))
print("; ".join(problems))
sys.exit(1 if problems else 0)
PY
); then
	pass check-json
else
	fail check-json "${out:-check --json is not JSON (status $status): $(head -c 300 "$d/check.json")}"
	finish
fi

# Exit status: 0 exactly when every required fact holds.
want=0
for n in $REQUIRED; do [ "$(fact "$n" ok)" = true ] || want=1; done
[ $status -eq $want ] && pass check-exit-status || fail check-exit-status "exit $status, required facts say $want"
[ $elapsed -le 30 ] && pass check-bounded || fail check-bounded "took ${elapsed}s"
# Its probe children are forks of this binary: none may outlive it.
left=$(pgrep -f "^$LAZYRESTORE check" | grep -vx $$)
[ -z "$left" ] && pass check-no-leftovers || fail check-no-leftovers "processes left: $left"

# Host: kernel release and CPU model name.
kernel=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["host"]["kernel"])' "$d/check.json")
[ "$kernel" = "$(uname -r)" ] && pass check-kernel || fail check-kernel "check says '$kernel', uname -r '$(uname -r)'"
cpu=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["host"]["cpu"])' "$d/check.json")
model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)
[ -n "$model" ] && { [ "$cpu" = "$model" ] && pass check-cpu || fail check-cpu "check says '$cpu', cpuinfo '$model'"; } ||
	skip check-cpu "no model name in /proc/cpuinfo"

# THP: the bracketed word of each sysfs file.
for k in enabled defrag; do
	f=/sys/kernel/mm/transparent_hugepage/$k
	if [ -r "$f" ]; then
		mode=$(sed -n 's/.*\[\(.*\)\].*/\1/p' "$f")
		got=$(fact "thp_$k" value)
		[ "$got" = "$mode" ] && pass "check-thp-$k" || fail "check-thp-$k" "check says '$got', $f says '$mode'"
	else
		skip "check-thp-$k" "no $f"
	fi
done

got=$(fact pipe_max_size value)
[ "$got" = "$(cat /proc/sys/fs/pipe-max-size)" ] && pass check-pipe-max-size ||
	fail check-pipe-max-size "check says '$got', /proc/sys/fs/pipe-max-size '$(cat /proc/sys/fs/pipe-max-size)'"

# CAP_SYS_RESOURCE is bit 24 of CapEff (this shell has the credentials check ran with).
capeff=$(sed -n 's/^CapEff:[[:space:]]*//p' /proc/self/status)
want=$([ $(((16#$capeff >> 24) & 1)) = 1 ] && echo true || echo false)
got=$(fact cap_sys_resource ok)
[ "$got" = "$want" ] && pass check-cap-sys-resource || fail check-cap-sys-resource "check says $got, CapEff $capeff"

# Soft-dirty: the kernel's build configuration, where it is readable.
cfg=/boot/config-$(uname -r)
[ -r "$cfg" ] || cfg=/proc/config.gz
if [ -r "$cfg" ]; then
	want=$(zcat -f "$cfg" | grep -q '^CONFIG_MEM_SOFT_DIRTY=y' && echo true || echo false)
	got=$(fact soft_dirty ok)
	[ "$got" = "$want" ] && pass check-soft-dirty || fail check-soft-dirty "check says $got, $cfg says $want"
else
	skip check-soft-dirty "no /boot/config-$(uname -r) or /proc/config.gz to compare with"
fi

# criu: the one beside the binary, with the version it prints itself.
got=$(fact criu value)
ver=$(timeout 10 "$CRIU" --version | sed -n 's/^Version: //p')
[[ $got == "$CRIU "*"version $ver" ]] && pass check-criu || fail check-criu "check says '$got', $CRIU says '$ver'"

# Hardware breakpoints: against criu's own probe, when this criu has one.
timeout 60 "$CRIU" check --feature hw_breakpoints >"$d/criu-check.log" 2>&1
rc=$?
if grep -q "Unknown feature" "$d/criu-check.log"; then
	skip check-hw-breakpoints-vs-criu "$CRIU has no 'check --feature hw_breakpoints' (criu-patches/0006 not applied)"
else
	want=$([ $rc -eq 0 ] && echo true || echo false)
	got=$(fact hw_breakpoints ok)
	[ $rc -ne 124 ] && [ "$got" = "$want" ] && pass check-hw-breakpoints-vs-criu ||
		fail check-hw-breakpoints-vs-criu "lazyrestore says $got, criu check exit $rc: $(tail -n1 "$d/criu-check.log")"
fi

# A criu that disagrees with our probe is reported as such; one that hangs in its check (with a
# child of its own) must not hang ours: bounded, its whole process group killed.
fake=$d/fake-criu
answer=$([ "$(fact hw_breakpoints ok)" = true ] && echo 1 || echo 0) # the opposite of ours
cat >"$fake" <<EOF
#!/bin/bash
case "\$*" in
--version) echo "Version: 9.9.9" ;;
*hw_breakpoints*)
	if [ -e "$d/hang" ]; then echo \$\$ >>"$d/fake.pids"; sleep 300 & echo \$! >>"$d/fake.pids"; sleep 301; fi
	exit $answer ;;
esac
EOF
chmod +x "$fake"
CRIU=$fake "$LAZYRESTORE" check --json >"$d/fake.json" 2>&1
got=$(/usr/bin/python3 -c 'import json, sys
print([f for f in json.load(open(sys.argv[1]))["facts"] if f["name"] == "criu_hw_breakpoints"][0]["value"])' "$d/fake.json")
[[ $got == *DISAGREE* ]] && pass check-criu-disagrees || fail check-criu-disagrees "a criu saying the opposite gave: $got"
touch "$d/hang"
start=$SECONDS
CRIU=$fake "$LAZYRESTORE" check >"$d/fake.txt" 2>&1
elapsed=$((SECONDS - start))
sleep 0.5
# only the fake's own processes: others on this machine may sleep too
# (a zombie is not running: its parent may not have reaped it yet)
left=$(for p in $(cat "$d/fake.pids" 2>/dev/null); do ps -o pid=,stat=,args= -p "$p" | grep -v '^ *[0-9]* Z'; done)
if [ $elapsed -le 25 ] && grep -q "timed out" "$d/fake.txt" && [ -z "$left" ]; then
	pass check-criu-hang-bounded
else
	fail check-criu-hang-bounded "${elapsed}s; $(grep agrees "$d/fake.txt"); left: $left"
fi

# Text output: one line per fact, the host named, a summary.
env -u CRIU "$LAZYRESTORE" check >"$d/check.txt" 2>&1
nfacts=$(/usr/bin/python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["facts"]))' "$d/check.json")
lines=$(grep -cE ' \.+ (ok|NO)' "$d/check.txt")
[ "$lines" -eq "$nfacts" ] && grep -q "^kernel  *$(uname -r)$" "$d/check.txt" && grep -q '^hw breakpoints \.* \(ok\|NO\)' "$d/check.txt" &&
	grep -q '^required facts: ' "$d/check.txt" && pass check-text ||
	fail check-text "$lines fact lines for $nfacts facts: $(head -c 300 "$d/check.txt")"

err=$("$LAZYRESTORE" check --bogus 2>&1 >/dev/null)
[ $? -eq 2 ] && [[ $err == *"lazyrestore check"* ]] && pass check-bad-option || fail check-bad-option "want exit 2 and a message, got: $err"
err=$("$LAZYRESTORE" check extra 2>&1 >/dev/null)
[ $? -eq 2 ] && [[ $err == *"unexpected argument 'extra'"* ]] && pass check-bad-argument ||
	fail check-bad-argument "want exit 2 and a message, got: $err"
"$LAZYRESTORE" check --help | grep -q "^usage: lazyrestore check" && pass check-help || fail check-help "no usage"
finish
