// Package images builds pinned guest root file systems: a Debian system made
// by debootstrap (--variant=minbase) and then brought to exactly the package
// versions its recipe lists, for use as the read-only root of a guest
// (`lockstep boot --root`, `observe --root`, `prune --root`).
//
// # Recipes
//
// A recipe is images/<name>/packages.txt, embedded in the binary so that
// `lockstep image build <name>` works outside a checkout. Its grammar, one
// statement per line, `#` starting a comment:
//
//	suite bookworm
//	bash=5.2.15-2+b13
//	coreutils=9.1-1
//
// The package lines are the whole closure (every package the built root
// holds), so nothing floats: a build whose installed set differs from the
// list in any way — a package missing, an extra one, another version — is
// refused, naming every difference. [Build] with [Options.Lock] relaxes the
// "extra package" rule once, to produce a new closure from a shorter list.
//
// # Sources
//
// Packages come from the URIs of this machine's own apt sources (deb822
// .sources files and one-line .list files under /etc/apt), for the recipe's
// suite and its -updates and -security companions; no host name is written
// into the project. The apt lists, sources list and caches are removed from
// the finished root, so the image names no mirror either.
//
// # Cache and identity
//
// An image lives in <cache>/lockstep/images/<name>-<key>/ where <key> is the
// first 16 hex digits of [Recipe.Key] (SHA-256 over the canonical recipe and
// the builder version). The directory holds root/ (the file system),
// manifest.txt (one `name=version arch` line per installed package, sorted)
// and image.json. The manifest hash (SHA-256 of manifest.txt's bytes) is the
// image's content identity: building a recipe twice gives the same manifest
// hash. [Lookup] re-derives the manifest from root/var/lib/dpkg/status and
// refuses an image whose packages no longer match what was recorded.
//
// # Environment
//
//   - XDG_CACHE_HOME: the cache root (default ~/.cache), as os.UserCacheDir.
//   - LOCKSTEP_APT_ROOT: read apt sources below this directory instead of /
//     (tests; a machine whose sources live elsewhere).
//
// # Limitations
//
// Building needs root (debootstrap, chroot) and the debootstrap package.
// Only amd64 Debian suites are supported.
package images
