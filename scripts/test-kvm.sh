#!/bin/bash
# make test-kvm: lockstep's KVM path, run where no /dev/kvm runs a guest.
# An outer guest under TCG (-cpu max offers AMD's SVM with nested paging)
# boots Debian's kernel (scripts/ref-kernel.sh: fetched once, nothing
# built) with kvm_amd; inside it the inner lockstep runs the pin under
# --accel kvm: probe, boot (-cpu host too, which fails there), selftest and
# observe of the fixture (harness.TestNestedKVM, docs/harness.md "The
# nested KVM test"). The inner results and each stage's time come back
# under OUT (default out/test-kvm).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
out=$(realpath -m "${OUT:-out/test-kvm}")
{ read -r LOCKSTEP_REF_KERNEL && read -r LOCKSTEP_REF_MODULES; } < <(scripts/ref-kernel.sh)
# ref-kernel.sh's failure does not reach set -e through the substitution.
[[ -n $LOCKSTEP_REF_MODULES ]]
rm -rf "$out"
export LOCKSTEP_REF_KERNEL LOCKSTEP_REF_MODULES LOCKSTEP_TEST_KVM_OUT=$out
t0=$SECONDS
CGO_ENABLED=0 "$GO" test -count=1 -timeout 60m -v -run '^TestNestedKVM$' ./harness/
echo "test-kvm: passed in $((SECONDS - t0)) s; results in $out"
