#!/bin/bash
# timeout: 300
# libuserfault's demo (lib/userfault/examples/uf-demand-file.c): a region
# demand-paged from a file in the SIGBUS handler, every byte verified.  Run
# at 64 MiB here; the 1 GiB figure is in lib/userfault/README.md.
set -u
. "$(dirname "$0")/../lib/common.sh"
BIN=$BUILD/bin/uf-demand-file
MIB=64
fail=0
work=$(mktemp -d /tmp/uf-demand-XXXXXX)
at_exit 'rm -rf "$work"'

if [ ! -x "$BIN" ]; then
	echo "FAIL: uf-demand-file: $BIN not built (run make)"
	exit 1
fi

# run NAME EXPECTED_FAULTS ARGS...: exit 0, all bytes verified, fault count
run() {
	local name=$1 faults=$2 out
	shift 2
	if ! out=$(run_bounded 120 "uf-demand-file $name" /dev/null "$BIN" -s $MIB -d "$work" "$@" 2>&1); then
		if grep -q 'cannot open a userfaultfd' <<<"$out"; then
			echo "SKIP: $name: no userfaultfd here: $out"
			return
		fi
		echo "FAIL: $name: $out"
		fail=1
		return
	fi
	if ! grep -q "all $((MIB << 20)) bytes verified" <<<"$out"; then
		echo "FAIL: $name: no verification line in: $out"
		fail=1
	elif [ -n "$faults" ] && ! grep -q ": $faults faults," <<<"$out"; then
		echo "FAIL: $name: expected $faults faults: $out"
		fail=1
	else
		echo "PASS: $name ($out)"
	fi
}

run demand-file-sequential-64k $((MIB * 1024 / 64)) -c 64
run demand-file-random-4k $((MIB * 1024 / 4)) -c 4 -r
run demand-file-thp-2m $((MIB / 2)) -c 2048 -H
# a chunk bigger than the page and random order: faults per chunk, any order
run demand-file-random-64k $((MIB * 1024 / 64)) -c 64 -r
run demand-file-thread-mode $((MIB * 1024 / 4)) -c 4 -T -r

# A flipped byte in the file must be caught and named by its word offset.
off=$(((MIB << 20) / 3 + 5))
if out=$(run_bounded 120 "uf-demand-file with a flipped byte" /dev/null "$BIN" -s $MIB -d "$work" -x $off 2>&1); then
	echo "FAIL: demand-file-detects-corruption: exit 0 with byte $off flipped: $out"
	fail=1
elif grep -q "word at byte offset $((off / 8 * 8)) is" <<<"$out"; then
	echo "PASS: demand-file-detects-corruption"
else
	echo "FAIL: demand-file-detects-corruption: wrong message: $out"
	fail=1
fi

# Bad options: refused with a message naming the option, exit 2.
for bad in "-s 0" "-c 3" "-c 12" "-s x" "-x -1" "-x 9z" "-T -c 64"; do
	# shellcheck disable=SC2086 # word splitting of the option is wanted
	out=$(run_bounded 30 "uf-demand-file $bad" /dev/null "$BIN" -d "$work" $bad 2>&1)
	st=$?
	if [ $st -eq 2 ] && grep -q 'bad ' <<<"$out"; then
		echo "PASS: demand-file-rejects '$bad'"
	else
		echo "FAIL: demand-file-rejects '$bad': status $st: $out"
		fail=1
	fi
done
exit $fail
