#!/bin/bash
# Install the Debian packages lazyrestore needs; silent when all are present.
set -euo pipefail

PKGS=(
	# CRIU 4.1.1 build
	build-essential pkg-config protobuf-c-compiler libprotobuf-c-dev
	protobuf-compiler libprotobuf-dev python3-protobuf libnl-3-dev
	libnl-route-3-dev libnet1-dev libcap-dev libbsd-dev libaio-dev
	libgnutls28-dev libnftables-dev uuid-dev xz-utils
	# our tests, zdtm and services
	libcmocka-dev python3-yaml iproute2 iptables nftables redis-server redis-tools memcached
	# container migration (test/lib/runc.sh, scripts/migrate-runc.sh)
	runc busybox-static
	# hardening: fuzzing and lint
	clang libclang-rt-14-dev cppcheck shellcheck clang-format
)

missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -q --no-install-recommends "${missing[@]}" >/tmp/lazyrestore-apt.log 2>&1; then
	apt-get update -q >>/tmp/lazyrestore-apt.log 2>&1 || true
	apt-get install -y -q --no-install-recommends "${missing[@]}" >>/tmp/lazyrestore-apt.log 2>&1 || {
		echo "deps: apt-get install failed, see /tmp/lazyrestore-apt.log" >&2
		tail -5 /tmp/lazyrestore-apt.log >&2
		exit 1
	}
fi
# A redis-server package starts a system service; our tests run their own.
if command -v systemctl >/dev/null 2>&1; then systemctl disable --now redis-server >/dev/null 2>&1 || true; fi
exit 0
