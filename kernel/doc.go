// Package kernel fetches, configures, builds, caches and verifies the pinned
// Linux kernels lockstep's guests boot.
//
// # Pins
//
// The pin table (pins.txt, embedded) has one row per kernel: its version,
// the Landlock ABI it must offer, where its source comes from and that
// source's SHA-256. A row is the version followed by key=value fields:
//
//	7.2.13 abi=10 source=debian package=linux-source-7.2 version=7.2.13-1 suite=sid sha256=… inner=usr/src/linux-source-7.2.tar.xz inner-sha256=…
//	7.2.9 abi=10 source=url url=https://cdn.kernel.org/…/linux-7.2.9.tar.xz sha256=…
//
// A source=debian pin is fetched with `apt-get download` against a temporary
// sources list (its own Dir::Etc::SourceList, lists and cache directories)
// that reuses the Debian archive URIs of the machine's apt sources with the
// pin's suite; the machine's apt configuration is only read. ParsePins refuses
// bad rows, every one with its line.
//
// # Build
//
// Build runs, for a pin not yet cached: download (SHA-256 checked before
// anything is unpacked), unpack, `make tinyconfig`, the fragment
// (fragment.config plus the pin version's fragment-X.Y.config overlays,
// embedded; FragmentFor) appended, `make olddefconfig`, the check that
// every CONFIG_X=value line of the fragment is in .config (else *UnfitError,
// listing all), then `make -j<cpus> bzImage`. Everything is built in; there
// are no modules.
//
// make runs in an environment of its own (buildEnv): PATH and TMPDIR from
// the caller, nothing else of it, plus a fixed KBUILD_BUILD_TIMESTAMP
// (BuildTimestamp), user, host and build number, LC_ALL=C, TZ=UTC, and
// -ffile-prefix-map for the source and object directories. The build is
// reproducible: two builds of one key give the same bzImage, whatever the
// cache directory, the -j or the caller's environment. A progress line (stage, elapsed, last compiled file) is
// logged every few seconds; with a Debug-level logger every external command
// is logged as a shell line.
//
// # Cache
//
// Each kernel lives in <cache>/<key>/ with bzImage, config, build.txt and
// build.log; downloads and unpacked sources live in <cache>/downloads and
// <cache>/sources. <cache> is $XDG_CACHE_HOME/lockstep/kernels (default
// ~/.cache/lockstep/kernels). The key is the SHA-256 over the pin row, the
// fragment as applied to the pin, BuilderVersion and the first lines of
// `gcc --version`, `make --version` and `ld --version` (see Key). Entries are written in a temporary directory
// and renamed into place; an flock per key makes concurrent builds of one key
// build once.
//
// # Verification
//
// Every Build and Path, cache hit or not, verifies the entry before returning
// it (VerifyDir): build.txt names this pin and key, the bzImage's SHA-256 and
// the config's equal build.txt's, every required option is in the config,
// and the version string the bzImage's setup header points to (the
// kernel_version field at 0x20E, an offset from 0x200) starts with the pin's
// version. A failure is a *VerifyError naming each failed check; the kernel
// is refused, not rebuilt.
//
// build.txt sits beside the bzImage, so whoever can write the cache (another
// CI run sharing it) can rewrite both. The repository therefore records the
// bzImage SHA-256 per key in bzimages.txt (embedded; RecordedImages): the
// key is computed on this machine, and when a row records it the bzImage
// must have that row's SHA-256, whatever build.txt says. A key with no row
// (another toolchain) is unrecorded: accepted, on build.txt's word, and
// reported as such (Verified.Recorded is nil, Result.NewRow is the row to
// add). A fresh build whose bzImage differs from its key's row is not
// cached (*UnreproducedError).
//
// # Environment
//
//   - XDG_CACHE_HOME: base of the default cache directory.
//   - LOCKSTEP_DEBIAN_MIRROR: a Debian archive URI to use instead of the ones
//     in /etc/apt (for runners whose apt sources are not Debian's; without it
//     such a runner fails at once with a *NoMirrorError saying what to set).
//   - LOCKSTEP_APT_DIR: the apt configuration directory whose sources are
//     searched for Debian archive URIs (default /etc/apt).
package kernel
