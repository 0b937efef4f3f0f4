#!/bin/bash
# Installs what lockstep's build, tests and demo need on a Debian machine:
# Debian packages (only those missing) and the Go modules. Idempotent.
# `deps.sh --list` prints the Debian packages, one a line, and does nothing
# else (scripts/runner-root.sh preinstalls them in a simulated runner).
# `deps.sh --toolchains` installs only the reference exercises' toolchains
# (make toolchains, which make test runs; docs/exercises.md): not part of
# make deps, which the workflows' setup action runs on runners that never
# build the exercises.
set -euo pipefail

# command-or-file:package pairs; a package is installed only when its probe is missing.
need=(
	qemu-system-x86_64:qemu-system-x86
	qemu-img:qemu-utils
	strace:strace
	make:make
	gcc:gcc
	/usr/include/stdio.h:libc6-dev
	bc:bc
	flex:flex
	bison:bison
	xz:xz-utils
	zstd:zstd
	lz4:lz4
	cpio:cpio
	perl:perl
	/usr/include/libelf.h:libelf-dev
	/usr/include/openssl/ssl.h:libssl-dev
	mkfs.ext4:e2fsprogs
	ip:iproute2
	python3:python3
	pytest-3:python3-pytest
	dpkg-deb:dpkg
	debootstrap:debootstrap
	shellcheck:shellcheck
	chromium:chromium
	/usr/share/keyrings/debian-archive-keyring.gpg:debian-archive-keyring
)
# The reference exercises' toolchains (testdata/exercises/*/*/README.md), Debian 12's packages.
toolchains=(
	maven openjdk-17-jdk-headless junit5 libsurefire-java libmaven-compiler-plugin-java
	libmaven-resources-plugin-java libmaven-jar-plugin-java
	cmake g++ catch2
	r-cran-testthat r-cran-xml2 r-cran-remotes
)

# apt_install PKG…: apt-get install the packages given, if any.
apt_install() {
	(($#)) || return 0
	echo "deps: installing $*" >&2
	if [[ $(id -u) != 0 ]]; then
		echo "deps: need root to install Debian packages: $*" >&2
		exit 1
	fi
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# fill_maven_repository: Maven's default local repository, ~/.m2/repository in the home the
# password database names (the JVM's user.home; /root for root), filled with a copy of Debian's
# Maven repository with its links resolved, as a grading image has its own filled: the java-maven
# reference exercise builds offline on it (its README), and its prune pins it to
# pruner/prune/seeds/maven-repo.sha256. One that exists is left as it is.
fill_maven_repository() {
	local repo
	repo=$(getent passwd "$(id -u)" | cut -d: -f6)/.m2/repository
	[[ ! -e $repo && -d /usr/share/maven-repo ]] || return 0
	mkdir -p "${repo%/*}"
	rm -rf "$repo.new"
	cp -rL /usr/share/maven-repo "$repo.new"
	mv "$repo.new" "$repo"
	echo "deps: filled $repo from /usr/share/maven-repo" >&2
}

case ${1:-} in
--list)
	printf '%s\n' "${need[@]#*:}"
	exit 0
	;;
--toolchains)
	missing=()
	for pkg in "${toolchains[@]}"; do
		[[ $(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null) == "install ok installed" ]] || missing+=("$pkg")
	done
	apt_install "${missing[@]}"
	fill_maven_repository
	exit 0
	;;
esac
missing=()
for pair in "${need[@]}"; do
	probe=${pair%%:*} pkg=${pair#*:}
	if [[ $probe == /* ]]; then
		[[ -e $probe ]] || missing+=("$pkg")
	else
		command -v "$probe" >/dev/null 2>&1 || missing+=("$pkg")
	fi
done
apt_install "${missing[@]}"
go mod download

# The host Landlock proof (observer/proof, which observe and its tests run on
# this machine) reads the active LSMs from securityfs. systemd mounts it at boot; a machine
# without systemd (a container, a bare VM image) may not have it.
if [[ $(id -u) == 0 && -d /sys/kernel/security ]] && ! mountpoint -q /sys/kernel/security; then
	if mount -t securityfs securityfs /sys/kernel/security; then
		echo "deps: mounted securityfs at /sys/kernel/security (as systemd does at boot)" >&2
	else
		echo "deps: securityfs is not mounted at /sys/kernel/security and could not be; host proofs will say so" >&2
	fi
fi
