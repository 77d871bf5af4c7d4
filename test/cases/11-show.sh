#!/bin/bash
# timeout: 120
# lazyrestore show: its page counts agree with what criu itself says it wrote
# (stats-dump, decoded by crit), its JSON parses, and bad input is an error.
. "$(dirname "$0")/../lib/common.sh"

d=$(scratch show)
at_exit 'kill_memhogs "$d"'
pid=$(start_memhog "$d" -m 8 -f -t 1) && criu_dump "$pid" "$d/img" || { fail show-setup "cannot dump memhog"; finish; }

if "$LAZYRESTORE" show --json "$d/img" >"$d/show.json" &&
	"$BUILD/criu/crit" decode -i "$d/img/stats-dump" >"$d/stats.json"; then
	if out=$(/usr/bin/python3 - "$d/show.json" "$d/stats.json" "$pid" <<'PY'
import json, sys
show = json.load(open(sys.argv[1]))
stats = json.load(open(sys.argv[2]))["entries"][0]["dump"]
root = int(sys.argv[3])
tot = show["totals"]
problems = []
if tot["lazy"] + tot["eager"] + tot["parent"] != stats["pages_written"]:
    problems.append("show counts %d+%d+%d pages, criu wrote %d" % (tot["lazy"], tot["eager"], tot["parent"], stats["pages_written"]))
for k in ("lazy", "eager", "parent", "remote"):
    if sum(t["pages"][k] for t in show["tasks"]) != tot[k]:
        problems.append("task %s counts do not add up to the total" % k)
    for t in show["tasks"]:
        if sum(v["pages"][k] for v in t["vmas"]) != t["pages"][k]:
            problems.append("task %d: VMA %s counts do not add up" % (t["pid"], k))
if show["tasks"][0]["pid"] != root or len(show["tasks"]) != 2:
    problems.append("tasks %s, want root %d and one child" % ([t["pid"] for t in show["tasks"]], root))
if any(v["pages"]["lazy"] and not v["lazy"] for t in show["tasks"] for v in t["vmas"]):
    problems.append("lazy pages in a VMA that cannot be lazy")
print("; ".join(problems))
sys.exit(1 if problems else 0)
PY
	); then
		pass show-json-matches-criu-stats
	else
		fail show-json-matches-criu-stats "$out"
	fi
else
	fail show-json-matches-criu-stats "show --json or crit decode failed"
fi

"$LAZYRESTORE" show "$d/img" >"$d/show.txt" && grep -q "^total: lazy" "$d/show.txt" && pass show-text ||
	fail show-text "no total line"

err=$("$LAZYRESTORE" show "$d/no-such-dir" 2>&1)
[ $? -eq 1 ] && [[ $err == *"no-such-dir: offset 0: cannot open image directory"* ]] && pass show-missing-dir ||
	fail show-missing-dir "got: $err"

head -c 100 "$d/img/pagemap-$pid.img" >"$d/pm" && cp "$d/pm" "$d/img/pagemap-$pid.img"
err=$("$LAZYRESTORE" show "$d/img" 2>&1 >/dev/null)
[ $? -eq 1 ] && [[ $err == *"pagemap-$pid.img: offset "* ]] && pass show-corrupt-pagemap ||
	fail show-corrupt-pagemap "got: $err"

"$LAZYRESTORE" show --bogus "$d/img" >/dev/null 2>&1
[ $? -eq 2 ] && pass show-bad-option || fail show-bad-option "want exit status 2"
"$LAZYRESTORE" show --help | grep -q "^usage: lazyrestore show" && pass show-help || fail show-help "no usage"
finish
