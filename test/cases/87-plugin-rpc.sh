#!/bin/bash
# timeout: 200
# An RPC restore (pycriu, criu swrk) with the plugin in CRIU_LIBS_DIR: its
# lazy_pages option is not visible to plugins, so by default the plugin
# says it is an RPC restore and does nothing (criu then finds no daemon);
# with LAZYRESTORE_PLUGIN=on it starts our daemon and the restore is lazy,
# every word checked.
. "$(dirname "$0")/../lib/plugin.sh"
trap plugin_cleanup EXIT
PY=/usr/bin/python3
"$PY" -c 'import google.protobuf' 2>/dev/null || { skip plugin-rpc "$PY has no protobuf (pycriu needs it)"; finish; }
plugin_setup plugin-rpc

# rpc_restore MODE: a lazy RPC restore with LAZYRESTORE_PLUGIN=MODE; prints pycriu's verdict.
rpc_restore() {
	CRIU_LIBS_DIR=$PLUGIN_LIB LAZYRESTORE_PLUGIN=$1 LAZYRESTORE_LOG=lazyrestore-plugin-rpc-$1.log \
		"$PY" - "$img" "$CRIU" "$1" "$BUILD/criu-src/lib" <<'PY'
import os, sys
img, criu, mode, lib = sys.argv[1:5]
sys.path.insert(0, lib)
import pycriu
c = pycriu.criu()
c.use_binary(criu)
c.opts.images_dir_fd = os.open(img, os.O_DIRECTORY)
c.opts.lazy_pages = True
c.opts.log_file = "restore-plugin-rpc-%s.log" % mode
c.opts.log_level = 4
try:
    print("restored: pid %d" % c.restore().pid)
except Exception as e:
    print("failed: %s" % e)
PY
}

wait_tree_gone "$img"
out=$(rpc_restore auto)
log=$img/restore-plugin-rpc-auto.log
if [[ $out == failed* ]] && grep -q 'lazyrestore.so: not a lazy restore (an RPC restore' "$log" &&
	grep -q 'connect to lazy-pages.socket failed' "$log"; then
	pass plugin-rpc-auto-steps-aside
else
	fail plugin-rpc-auto-steps-aside "pycriu: $out; plugin: $(grep -m1 lazyrestore.so "$log")"
	kill_memhogs "$d"
fi

wait_tree_gone "$img"
name=plugin-rpc-on
out=$(rpc_restore on)
log=$img/restore-$name.log
PLUGIN_PID=$(sed -n 's/.*lazyrestore.so: .* lazy-pages (pid \([0-9]*\)) listens.*/\1/p' "$log")
if [[ $out == restored* ]] && [ -n "$PLUGIN_PID" ] && grep -q 'nr_lazy: *[1-9]' "$log"; then
	pass "$name-restore"
	check_memhog "$name" "$d"
	plugin_daemon_ok "$name" "$img"
else
	fail "$name-restore" "pycriu: $out; $(first_err "$log")"
fi
kill_memhogs "$d"
finish
