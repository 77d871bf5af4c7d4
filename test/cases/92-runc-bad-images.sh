#!/bin/bash
# timeout: 300
# Images that arrive damaged at the destination (a copy cut short: the
# largest pages-*.img truncated to half by the --copy step of
# scripts/migrate-runc.sh) must make the migration fail at once with a line
# naming the pages file and where it ends, and leave no destination
# container running; never hang, never run with missing memory:
#   images/ours  `lazyrestore lazy-pages` refuses the images before the restore
#   eager        criu's own page reading stops (criu-patches/0011; before it,
#                criu restore looped at the end of the file for ever)
. "$(dirname "$0")/../lib/common.sh"
. "$TOP/test/lib/runc.sh"

d=$(scratch runc-bad-images)
at_exit ct_cleanup
runc_ready runc-bad-images || finish

# variant NAME MODE DAEMON WANT: WANT, a regex the migration's last words must match
variant() {
	local name=$1 mode=$2 daemon=$3 want=$4 v=$d/$1 src=bs-$1-$$ dst=bd-$1-$$ last
	ct_pair "$name" "$v" "$src" "$dst" /progs/memhog -d /share -m 64 || return 1
	wait_until 60 "memhog in $src getting ready" /dev/null test -e "$v/share/ready.1"
	cat >"$v/cut-copy.sh" <<'EOF'
#!/bin/bash
# the images copied, the largest pages file cut to half on the way
cp -a "$1/." "$2/" || exit 1
f=$(ls -S "$2"/pages-*.img | head -n1)
truncate -s $(($(stat -c %s "$f") / 2)) "$f"
EOF
	chmod +x "$v/cut-copy.sh"
	RUNC_IDS+=("$dst")
	MIGRATE_LOG=$v/migrate.log
	if run_bounded -o "$MIGRATE_LOG" 120 "migrate-runc.sh with cut images ($name)" "$MIGRATE_LOG" \
		"$MIGRATE" --root "$RUNC_ROOT" --criu "$CRIU" --lazyrestore "$LAZYRESTORE" --timeout 60 \
		--mode "$mode" --daemon "$daemon" --images "$v/img" --dst-images "$v/dst-img" --work "$v/work" \
		--copy "$v/cut-copy.sh" --bundle "$v/dst" "$src" "$dst"; then
		fail "$name-refused" "the migration succeeded from truncated images"
	else
		last=$(grep -v 'images and logs kept' "$MIGRATE_LOG" | tail -n1)
		if [[ $last =~ $want ]]; then
			pass "$name-refused"
			echo "    $name: $last"
		else
			fail "$name-refused" "want /$want/, got: $last"
		fi
	fi
	if [ "$(ct_field "$dst" status)" = running ]; then
		fail "$name-nothing-runs" "$dst runs from truncated images"
	else
		pass "$name-nothing-runs"
	fi
}

variant images-ours images ours 'pages-[0-9]+\.img.*(has only|ends at)'
variant eager eager stock '([Pp]ages image|pages-[0-9]+\.img) ends at offset [0-9]+'
finish
