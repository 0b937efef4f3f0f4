// Package exercise is the exercise contract the pruner and the observer
// share: discovery of exercises under a testing root, their prune.json, and
// one run of an exercise in a fresh working directory.
//
// # The contract
//
// An exercise is a folder <root>/<family>/<exercise>/ (dot-directories are
// ignored) holding an executable build_script.sh, or build_script, looked up
// in that order. Every run starts from a fresh copy of the folder in the
// working directory (/var/tmp/testing-dir in production; [RunOptions.WorkDir]
// names it), and runs there as
//
//	/bin/bash ./build_script.sh
//
// with stdin from /dev/null, in a process group of its own. Its tests write
// JUnit XML where prune.json's report_globs point (relative to the working
// directory; by default [DefaultReportGlobs]). The committed folder must hold
// no file those globs match, so every report a run leaves is that run's.
//
// # prune.json
//
// Optional. A JSON object; unknown keys, duplicate keys and wrong types are
// refused, naming every problem. The keys ([Config]):
//
//	key                         string  language key, ^[a-z0-9]+(-[a-z0-9]+)*$ (default: the family folder's name)
//	seed                        string  seed policy file name, [A-Za-z0-9][A-Za-z0-9._-]*\.cfg
//	report_globs                [string] non-empty; relative; "**" matches any number of folders
//	heap_pinned                 bool    the limits stage derives mem_mb
//	declared_hosts              [string] "<lower-case dns name>:<port>[ tcp|udp]"; each becomes a [connect] seed rule
//	pinned_read_roots           [{path, manifest}] exactly those two keys
//	runs_compiled_programs      bool    keep [execute] beside write on the compiled-programs directory
//	compiled_programs_directory string  relative folder of the working directory (default "assignment"); must exist in the exercise
//	uses_pseudo_terminals       bool    the policy may grant /dev/pts read, write and ioctl
//	address_space_unbounded     bool    the written limits carry mem_mb=0
//
// # Discovery
//
// [Discover] lists every exercise of a testing root and refuses the whole
// tree, with every problem at once, when a prune.json is unreadable, not a
// regular file or not a JSON object, when an exercise's key (prune.json's
// "key", else its family's name) is not a valid key, or when two exercises
// of one key share a folder name. [Read] then checks one exercise's contract
// and returns an error wrapping [ErrRefused] for that exercise alone.
//
// # Running
//
// [Exercise.Run] replaces the working directory with a fresh copy, runs the
// build script behind an optional command prefix (the enforcer, strace, or
// both), captures status, stdout, stderr and their interleaving, kills what
// the run left in its process group, collects the JUnit reports and judges
// them with package verdict. It runs nothing outside the working directory
// itself, but what the build script does is up to the build script: run
// exercises you did not write only inside a disposable machine.
//
// A sentinel line printed on stderr right before the build script starts
// tells the caller whether the prefix let the command start at all
// ([Result.Started], [Result.BeforeStart]).
//
// An isolated run ([RunOptions.Isolate], package internal/refns: root's
// reference run in verify's and the observer's guests) runs in user, mount
// and PID namespaces of its own, with the paths its caller names, the
// system's and the kernel's read-only to it: it cannot change what its
// caller reads or runs after it, and everything it starts, setsid daemons
// included, dies with it.
//
// # Limitations
//
// A process that leaves the run's process group (setsid) is not killed by
// the runner unless the run is isolated; the pruner runs exercises in a
// throwaway guest for that reason.
package exercise
