#!/bin/bash
# The 1 GiB demand-paging demo (uf-demand-file) in each chunk size, order
# and mode (SIGBUS + move; "thread": fault thread + UFFDIO_COPY), REPS times
# each, as a table of medians (wall and CPU seconds).
#   demand-file.sh [BIN] [MiB] [REPS]
set -euo pipefail
BIN=${1:-$(dirname "$0")/../../build/bin/uf-demand-file}
MIB=${2:-1024}
REPS=${3:-3}
[ "$REPS" -ge 3 ] || { echo "demand-file.sh: REPS must be >= 3" >&2; exit 2; }

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

echo "uf-demand-file: $MIB MiB region demand-paged from a file, every byte verified; median of $REPS runs"
echo
printf '| %-28s | %8s | %10s | %8s | %8s |\n' "chunk, order" "faults" "wall s" "GB/s" "CPU s"
printf '|%s|%s|%s|%s|%s|\n' "------------------------------" "----------" "------------" "----------" "----------"
for cfg in "-c 4" "-c 4 -r" "-c 4 -T" "-c 4 -T -r" "-c 64" "-c 64 -r" "-c 2048 -H" "-c 2048 -H -r"; do
	walls=() cpus=() faults=
	for _ in $(seq "$REPS"); do
		# shellcheck disable=SC2086 # cfg is a list of options
		out=$("$BIN" -s "$MIB" $cfg)
		walls+=("$(sed -n 's/.*verified, \([0-9.]*\) s .*/\1/p' <<<"$out")")
		cpus+=("$(sed -n 's/.*CPU \([0-9.]*\) s$/\1/p' <<<"$out")")
		faults=$(sed -n 's/.*: \([0-9]*\) faults,.*/\1/p' <<<"$out")
	done
	wall=$(printf '%s\n' "${walls[@]}" | median)
	cpu=$(printf '%s\n' "${cpus[@]}" | median)
	name=$(sed -e 's/-c \([0-9]*\)/\1 KiB/' -e 's/ -H/ THP/' -e 's/ -T/ thread/' -e 's/ -r/, random/' <<<"$cfg")
	[[ $cfg == *-r* ]] || name="$name, sequential"
	printf '| %-28s | %8s | %10.3f | %8.2f | %8.3f |\n' "$name" "$faults" "$wall" \
		"$(awk -v m="$MIB" -v w="$wall" 'BEGIN {print m * 1048576 / w / 1e9}')" "$cpu"
done
