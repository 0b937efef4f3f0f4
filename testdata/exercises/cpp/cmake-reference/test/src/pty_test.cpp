#include <catch2/catch.hpp>

#include <string>

#include "ring.h"

// AddressSanitizer reads ASAN_OPTIONS from /proc/self/environ, which a Landlock policy never
// grants (a name under one process's /proc directory), so the options are compiled in. Leak
// detection is off: LeakSanitizer stops the threads through ptrace and /proc/<pid>/task, which
// fails under the pruner's strace and under the policy.
extern "C" const char* __asan_default_options() { return "detect_leaks=0"; }

// The tester drives a program on a terminal: a line written to the controller comes back on the
// terminal side (prune.json uses_pseudo_terminals).
TEST_CASE("Pty echoes a line", "[pty]") {
    CHECK(ptyEcho("hello terminal") == "hello terminal");
}
