// Package workflows holds lockstep's composite GitHub Actions and the test that
// keeps them, and .github/workflows, honest. There is no Go API here: the
// folder's content is YAML (setup, enable-kvm, kernel, observe, orchestrate,
// each workflows/<name>/action.yml) and this package's test.
//
// # What the test checks
//
// Every workflow and action file is parsed (gopkg.in/yaml.v3), and each
// `run:` step's shell script is parsed (mvdan.cc/sh/v3/syntax). A step may
// call only:
//
//   - `lockstep <verb>` for a verb registered in cmd/lockstep (found by
//     parsing its Go files for `verb{Name: …}`), with a subcommand its Usage
//     lists and only flags its Flags function defines;
//   - `make <target>` for a target of the Makefile (with -C only to the
//     repository root);
//   - a script of the repository, by path, that exists and is executable;
//   - a few shell builtins (echo, printf, test, …), optionally behind sudo
//     or env.
//
// Every `uses:` names a local action that exists or an action pinned by a
// full 40-hex commit SHA; every workflow declares top-level permissions and
// every job a timeout and permissions that grant nothing beyond read. The
// lockstep calls of scripts/prune-kvm.sh are held to the same verb and flag
// rules. Logic belongs in lockstep, not in YAML: anything else a workflow
// needs goes into a script here or a lockstep verb, so it runs locally too.
//
// # Usage in a project
//
// See docs/ci.md for the `uses:` lines.
package workflows
