#!/bin/bash
# make test-race: the race detector over every package whose Go files (tests
# included) start goroutines: a go statement or an errgroup's Go, found in
# the files themselves so that no package is left out. Host-kernel and
# guest tests run as in make test. Two packages are left out whose tests
# alone start goroutines: cmd/lockstep's end-to-end verbs and the workflows'
# act simulations run the code of the packages here, which are race-tested
# on their own, and run again under the detector they would double CI's
# time.
#
# -race needs cgo, which the Makefile turns off for everything else. Guest
# tests boot their own test binary as the guest's PID 1, which must be
# static: the binary is linked statically (glibc's static archive), with
# Go's own user and DNS look-ups (osusergo, netgo) so no glibc NSS code is
# linked in.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
TIMEOUT=${TIMEOUT:-80m}

pkgs=()
while read -r pkg dir; do
	case $pkg in
	*/cmd/lockstep | */workflows) continue ;;
	esac
	if grep -qE '^\s*go [A-Za-z_(]|\.Go\(func' "$dir"/*.go 2>/dev/null; then
		pkgs+=("$pkg")
	fi
done < <("$GO" list -f '{{.ImportPath}} {{.Dir}}' ./...)
if ((${#pkgs[@]} == 0)); then
	echo "test-race: no package starts a goroutine (is this the module's root?)" >&2
	exit 1
fi
echo "test-race: ${#pkgs[@]} packages: ${pkgs[*]}"
CGO_ENABLED=1 "$GO" test -race -count=1 -timeout "$TIMEOUT" -tags osusergo,netgo \
	-ldflags '-linkmode=external -extldflags=-static' "${pkgs[@]}"
