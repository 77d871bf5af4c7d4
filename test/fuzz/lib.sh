#!/bin/bash
# Helpers to run the libFuzzer targets of build/fuzz/; sourced by
# test/fuzz/run-fuzz.sh (make fuzz) and test/cases/60-fuzz.sh (make test).
FUZZ_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
FUZZ_BIN=$FUZZ_TOP/build/fuzz
FUZZ_SRC=$FUZZ_TOP/test/fuzz
[ -d /dev/shm ] && [ -w /dev/shm ] || FUZZ_SHM=${TMPDIR:-/tmp}

# fuzz_targets: the name of every built target
fuzz_targets() {
	local b
	for b in "$FUZZ_BIN"/fuzz_*; do [ -x "$b" ] && basename "$b"; done
}

# fuzz_inputs TARGET [DIR...]: its committed seeds and regression inputs, and
# those in DIR/TARGET (generated ones), one per line
fuzz_inputs() {
	local t=$1 d dirs=("$FUZZ_SRC/corpus/$1" "$FUZZ_SRC/regressions/$1")
	shift
	for d in "$@"; do dirs+=("$d/$t"); done
	find "${dirs[@]}" -type f 2>/dev/null | sort
}

# fuzz_exec TARGET ARGS...: run a target with a scratch dir on tmpfs of its own,
# removed afterwards even if the target died (fuzz_images writes its dumps there)
fuzz_exec() {
	local t=$1 shm status
	shift
	shm=$(mktemp -d "${FUZZ_SHM:-/dev/shm}/lazyrestore-fuzz-$t.XXXXXX") || return 1
	FUZZ_SCRATCH=$shm "$FUZZ_BIN/$t" "$@"
	status=$?
	rm -rf "$shm"
	return $status
}

# fuzz_replay TARGET LOG [DIR...]: run every input of fuzz_inputs once; non-zero if one fails
fuzz_replay() {
	local t=$1 log=$2 inputs
	shift 2
	mapfile -t inputs < <(fuzz_inputs "$t" "$@")
	[ ${#inputs[@]} -gt 0 ] || { echo "no inputs for $t" >"$log"; return 1; }
	fuzz_exec "$t" -timeout=10 "${inputs[@]}" >"$log" 2>&1
}

# fuzz_run TARGET SECONDS WORKDIR: fuzz from the committed inputs plus WORKDIR/corpus
# (new inputs go there, never into the tree), crashes into WORKDIR/artifacts/,
# output in WORKDIR/fuzz.log.  Non-zero if the fuzzer found anything.
fuzz_run() {
	local t=$1 secs=$2 w=$3 dirs=()
	mkdir -p "$w/corpus" "$w/artifacts" || return 1
	[ -d "$FUZZ_SRC/corpus/$t" ] && dirs+=("$FUZZ_SRC/corpus/$t")
	[ -d "$FUZZ_SRC/regressions/$t" ] && dirs+=("$FUZZ_SRC/regressions/$t")
	(cd "$w" && fuzz_exec "$t" -max_total_time="$secs" -timeout=10 -print_final_stats=1 \
		-artifact_prefix="$w/artifacts/" corpus "${dirs[@]}") >"$w/fuzz.log" 2>&1
}

# fuzz_summary WORKDIR: "N execs, E exec/s, cov: C ft: F, corpus N" from a fuzz_run log
fuzz_summary() {
	local log=$1/fuzz.log last execs rate
	last=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -n1)
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
	echo "${execs:-?} execs, ${rate:-?} exec/s, $(echo "$last" | grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9]+[a-zA-Z]*')"
}

# fuzz_finding WORKDIR: the fuzzer's own line about what it found, and the input's path
fuzz_finding() {
	grep -E '^(==[0-9]+==ERROR|SUMMARY|.*invariant violated|.*Test unit written to|.*deadly signal|.*-timeout)' \
		"$1/fuzz.log" | head -n5
}
