# lockstep: see README.md. `make demo` and `make test` work on a fresh Debian machine.
GO          ?= go
BIN         := bin/lockstep
PIN         ?= 7.2.13
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
ACTIONLINT  := github.com/rhysd/actionlint/cmd/actionlint@v1.7.12
export CGO_ENABLED := 0

.PHONY: all build deps toolchains test test-race test-slow test-kvm bases demo bench bench-kernel lint prune-kvm prune-kvm-sim consumer-sim kernel-matrix-sim fuzz stress clean

all: build

deps:
	@scripts/deps.sh

# The reference exercises' toolchains (Java and Maven with Maven's local
# repository filled, CMake and GoogleTest, R and testthat; docs/exercises.md):
# make test runs them, make deps (the workflows' setup) does not.
toolchains:
	@scripts/deps.sh --toolchains

# The revision and whether the tree is modified, for `lockstep --version`:
# the go command stamps them itself, but not in a git worktree (which it does
# not recognise) nor where GOFLAGS has -buildvcs=false (kept: with it a
# checkout git refuses to read, as in a CI container, still builds), so they
# are also passed by hand (internal/version). Evaluated only here.
VERSION_PKG := github.com/lockstep-sandbox/lockstep/internal/version
REVISION = $(shell git rev-parse HEAD 2>/dev/null)
MODIFIED = $(shell test -z "$$(git status --porcelain 2>/dev/null)" && echo false || echo true)

build:
	$(GO) build -trimpath -ldflags='-s -w -X $(VERSION_PKG).revision=$(REVISION) -X $(VERSION_PKG).modified=$(MODIFIED)' -o $(BIN) ./cmd/lockstep

# The whole suite: unit, host-kernel and guest tests, the KVM path nested
# (test-kvm, about 3.5 minutes alone on 2 cores), then coverage-guided fuzzing
# of every parser of outside input (30 s for the policy parser, 20,000 inputs
# for each other).
test: deps toolchains build
	$(BIN) kernel build --pin $(PIN)
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 75m ./...
	$(MAKE) test-kvm
	$(MAKE) fuzz

# The race detector (CGO_ENABLED=1 go test -race) over every package that
# starts goroutines, host-kernel and guest tests included
# (scripts/test-race.sh; .ci/run runs it after make test).
test-race: deps build
	$(BIN) kernel build --pin $(PIN)
	GO=$(GO) scripts/test-race.sh

# The KVM path (probe, -accel kvm and its CPU model, deadlines, records)
# run where /dev/kvm runs no guest: the pin under KVM inside a TCG guest of
# Debian's kernel with kvm_amd (scripts/test-kvm.sh, docs/harness.md "The
# nested KVM test"); the inner results come back under OUT.
test-kvm: deps build
	$(BIN) kernel build --pin $(PIN)
	GO=$(GO) OUT=$(if $(filter command line environment,$(origin OUT)),$(OUT),out/test-kvm) scripts/test-kvm.sh

# The tests too slow for every landing: the whole java-maven prune on the
# host (87 runs of a JVM build) and its abort without a seed.
test-slow: deps toolchains build
	LOCKSTEP_SLOW_TESTS=1 $(GO) test -count=1 -timeout 120m -v -run '^(TestHostJavaMaven|TestHostJavaMavenNoSeed)$$' ./pruner/prune/

# Not in CI (three to four hours, one language after another, on 2 busy
# cores; docs/prune.md "Shipped bases"): re-makes bases/, every built
# language's reference exercise pruned on this machine's kernel, observed on
# the pin in a TCG or KVM guest, and merged (scripts/bases.sh). The prunes
# delete what an exercise leaves behind: run it as
# `LOCKSTEP_DISPOSABLE=1 make bases` on a machine you can throw away. make
# test checks the result (verify.TestShippedBases).
bases: deps toolchains build
	scripts/bases.sh --pin $(PIN)

# Every Fuzz function of the module (scripts/fuzz.sh finds them): FUZZTIME
# executions each, POLICY_FUZZTIME for the policy parser.
FUZZTIME ?= 20000x
POLICY_FUZZTIME ?= 30s
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) POLICY_FUZZTIME=$(POLICY_FUZZTIME) scripts/fuzz.sh

# Not in make test: the host-kernel and guest tests that have flaked, N rounds
# with -count=1 and one more beside a CPU hog on every core; per test
# "N passed, M failed" and the output of every failure (docs/reliability.md).
N ?= 5
stress: deps build
	$(BIN) kernel build --pin $(PIN)
	GO=$(GO) N=$(N) scripts/stress.sh

demo: deps build
	@scripts/demo.sh

# Every benchmark once, with ratios against the references measured in the
# same run (boot: Debian's kernel on q35 + SeaBIOS; the enforcer: bare true).
bench: deps build
	@scripts/bench.sh

# Not in CI: builds the same kernel source with our fragment and with Phobos's
# configuration (about half an hour on 2 quiet cores) and prints the ratio.
bench-kernel: build
	scripts/bench-kernel.sh

lint:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt: these files need formatting:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	$(GO) run $(ACTIONLINT) -config-file workflows/actionlint.yaml .github/workflows/*.yml
	shellcheck -x scripts/*.sh workflows/enable-kvm/enable-kvm.sh workflows/kernel/discard-cached.sh

# The prune-kvm pipeline of .github/workflows/prune-kvm.yml, run locally:
# default prune, the observer twice, the merge of both, the summary.
# The default prune stands for CI's prune container, whose kernel is below
# Landlock ABI 10: it runs in a guest on the 6.12.117 pin (ABI 6), so ABI-10
# rows (UDP) are left to the observers, as on GitHub's runners. Where no
# image registry answers, the prune image's base is made offline, as
# LOCKSTEP_PRUNE_BASE=offline does for prune-kvm-sim (docs/ci.md).
KEY    ?=
SOURCE ?= $(if $(filter fixture,$(KEY)),fixture,reference)
PRUNE_KERNEL ?= 6.12.117
prune-kvm: deps build
	@test -n "$(KEY)" || { echo "usage: make prune-kvm KEY=<key> [SOURCE=fixture|reference]" >&2; exit 2; }
	PATH="$(CURDIR)/bin:$$PATH" scripts/prune-kvm.sh all --key $(KEY) --source $(SOURCE) --prune-kernel $(PRUNE_KERNEL)

# .github/workflows/prune-kvm.yml itself, run here by act on a simulated
# foreign runner (scripts/prune-kvm-sim.sh, docs/ci.md): the container prune,
# both kvm jobs, the merge; artefacts and summary.md under OUT. RUNNER=foreign
# runs every job on another Debian suite's root with no Debian archive in its
# apt sources (scripts/runner-root.sh).
OUT ?= out/prune-kvm-sim
RUNNER ?= host
prune-kvm-sim: deps build
	@test -n "$(KEY)" || { echo "usage: make prune-kvm-sim KEY=<key> [SOURCE=fixture|reference] [OUT=dir] [RUNNER=host|foreign]" >&2; exit 2; }
	scripts/prune-kvm-sim.sh --key $(KEY) --source $(SOURCE) --out $(OUT) --runner $(RUNNER)

# A consumer's repository, simulated: testdata/consumer's own exercises and
# workflow, which calls lockstep's actions by
# lockstep-sandbox/lockstep/workflows/<action>@<revision>, run by act with
# this checkout mapped as that remote (scripts/consumer-sim.sh, docs/ci.md);
# the merged base ends under OUT/merged-base.
consumer-sim: deps build
	scripts/consumer-sim.sh --out $(if $(filter command line,$(origin OUT)),$(OUT),out/consumer-sim)

# .github/workflows/kernel-matrix.yml itself, run here by act (scripts/kernel-matrix-sim.sh,
# docs/ci.md): the plan, a kernel job per pin, a verify leg per base and pin,
# the summary, the gate; OUT/summary.md holds the bases × kernels table.
# BASES and PINS are space-separated (empty: every base of bases/, every
# pin); EXTRA_PINS names a file of extra pin rows.
BASES ?=
PINS ?=
EXTRA_PINS ?=
kernel-matrix-sim: deps build
	scripts/kernel-matrix-sim.sh --out $(if $(filter command line,$(origin OUT)),$(OUT),out/kernel-matrix-sim) \
		--bases "$(BASES)" --pins "$(PINS)" $(if $(EXTRA_PINS),--extra-pins $(EXTRA_PINS))

clean:
	rm -rf bin
