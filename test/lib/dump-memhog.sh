#!/bin/bash
# dump-memhog.sh OUTDIR [memhog args]: start memhog, dump it into OUTDIR/img.
# The manifests (and ready files) stay in OUTDIR.  Used by the unit tests.
. "$(dirname "$0")/common.sh"
out=$1
shift
rm -rf "$out" && mkdir -p "$out/img" || exit 1
pid=$(start_memhog "$out" "$@") || exit 1
criu_dump "$pid" "$out/img" || { echo "criu dump failed, see $out/img/dump.log" >&2; tail -5 "$out/img/dump.log" >&2; kill_memhogs "$out"; exit 1; }
