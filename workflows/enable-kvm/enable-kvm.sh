#!/bin/bash
# Makes /dev/kvm usable by every user on a GitHub-hosted runner: a udev rule
# (group kvm, mode 0666), reloaded and triggered for the kvm node, as
# arighi/virtme-ng and libbpf/ci do. Appends kvm=true|false to OUTPUT_FILE
# when one is given (the step's $GITHUB_OUTPUT). Exit 0 either way: `lockstep probe` and the guests themselves
# decide what a missing KVM means (TCG, slower); exit 2 on usage.
set -euo pipefail
if (($# > 1)); then
	echo "usage: enable-kvm.sh [OUTPUT_FILE] (as root)" >&2
	exit 2
fi
out=${1:-}
rule='KERNEL=="kvm", GROUP="kvm", MODE="0666", OPTIONS+="static_node=kvm"'
mkdir -p /etc/udev/rules.d
printf '%s\n' "$rule" >/etc/udev/rules.d/99-lockstep-kvm.rules
# A runner without a udev daemon (a container, the simulated runner of
# scripts/prune-kvm-sim.sh) keeps /dev/kvm as it is; the check below says
# whether that is usable.
if command -v udevadm >/dev/null && udevadm control --reload-rules 2>/dev/null; then
	udevadm trigger --name-match=kvm
	udevadm settle --timeout=10 || true
else
	echo "enable-kvm: no udev daemon answers; /dev/kvm keeps its mode"
fi
usable=false
if [[ -c /dev/kvm ]] && [[ $(stat -c %a /dev/kvm) == 666 ]]; then
	usable=true
	echo "enable-kvm: /dev/kvm is usable ($(stat -c '%A %G' /dev/kvm))"
elif [[ -e /dev/kvm ]]; then
	echo "::warning title=KVM::/dev/kvm exists but is not mode 0666 after the udev rule ($(stat -c '%A %G' /dev/kvm)); guests fall back to TCG"
else
	echo "::warning title=KVM::this runner has no /dev/kvm; guests run under TCG (several times slower)"
fi
if [[ -n $out ]]; then
	echo "kvm=$usable" >>"$out"
fi
