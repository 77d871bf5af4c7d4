#!/bin/bash
# lint.sh: every check `make lint` runs over the files git tracks.
#   clang-format  --dry-run -Werror over our C (.clang-format is the style)
#   cppcheck      with .cppcheck-suppressions (each entry justified there)
#   scripts       shellcheck over *.sh and files with a sh/bash shebang
#   gcc, clang    -fsyntax-only with the build's flags (LINT_CFLAGS, from make)
# Prints one line per check and exits non-zero if any failed.
# LINT_ONLY=REGEX runs only the checks whose name matches.
set -u
TOP=$(cd "$(dirname "$0")/.." && pwd)
cd "$TOP" || exit 1
read -r -a CFLAGS <<<"${LINT_CFLAGS:--std=gnu11 -Wall -Wextra -Werror -D_GNU_SOURCE -I$TOP}"
JOBS=$(nproc)
LOG=$TOP/build/lint
mkdir -p "$LOG"
failed=()

mapfile -t C_FILES < <(git ls-files -- '*.c' '*.h')
mapfile -t SH_FILES < <(git ls-files -- '*.sh' && git ls-files -- ':!*.*' | while read -r f; do
	[ -f "$f" ] && head -n1 "$f" | grep -qE '^#!.*\b(ba)?sh\b' && echo "$f"
done)

# check NAME CMD...: run CMD, keep its output in build/lint/NAME.log, say how it went.
check() {
	local name=$1 start=$SECONDS
	shift
	[[ $name =~ ${LINT_ONLY:-.} ]] || return 0
	if "$@" >"$LOG/$name.log" 2>&1; then
		printf 'lint: %-14s ok (%ds)\n' "$name" $((SECONDS - start))
	else
		printf 'lint: %-14s FAILED (%ds):\n' "$name" $((SECONDS - start))
		head -n 40 "$LOG/$name.log" | sed 's/^/    /'
		failed+=("$name")
	fi
}

clang_format() {
	clang-format --dry-run -Werror "${C_FILES[@]}"
}

cppcheck_all() {
	# Only our own headers: the system's and protobuf-c's would make it slow and are not ours.
	cppcheck --quiet --error-exitcode=1 -j "$JOBS" --std=c11 --platform=unix64 \
		--enable=warning,portability,performance --inline-suppr \
		--suppressions-list=.cppcheck-suppressions -D_GNU_SOURCE -I. \
		--cppcheck-build-dir="$LOG/cppcheck-cache" "${C_FILES[@]}"
}

shellcheck_all() {
	# Warnings and errors are bugs; info and style notes are advice, left to each author.
	# -x -P SCRIPTDIR follows `. "$(dirname "$0")/lib.sh"`, so a variable set for a
	# sourced helper counts as used.
	printf '%s\0' "${SH_FILES[@]}" |
		xargs -0 -r -n 4 -P "$JOBS" shellcheck --severity=warning -x -P SCRIPTDIR
}

# LINT_FILE_FLAGS="FILE=FLAG,FLAG ...": extra flags a module builds one file with.
declare -A FILE_FLAGS=()
for spec in ${LINT_FILE_FLAGS:-}; do FILE_FLAGS[${spec%%=*}]=${spec#*=}; done

# compile CC: every .c file, syntax and warnings only; the plain ones in parallel.
compile() {
	local cc=$1 f status=0 extra
	printf '%s\0' "${C_FILES[@]}" | grep -z '\.c$' | grep -zvxF -f <(printf '%s\n' "${!FILE_FLAGS[@]}") |
		xargs -0 -r -n 8 -P "$JOBS" "$cc" -fsyntax-only "${CFLAGS[@]}" || status=1
	for f in "${!FILE_FLAGS[@]}"; do
		[ -f "$f" ] || continue
		IFS=, read -r -a extra <<<"${FILE_FLAGS[$f]}"
		"$cc" -fsyntax-only "${CFLAGS[@]}" "${extra[@]}" "$f" || status=1
	done
	return $status
}

mkdir -p "$LOG/cppcheck-cache"
check clang-format clang_format
check cppcheck cppcheck_all
check shellcheck shellcheck_all
check gcc compile gcc
check clang compile clang

if [ ${#failed[@]} -gt 0 ]; then
	echo "lint: FAILED: ${failed[*]} (logs in build/lint/)"
	exit 1
fi
echo "lint: all checks passed"
