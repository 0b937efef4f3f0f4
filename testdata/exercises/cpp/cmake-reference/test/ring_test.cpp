#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "ring.h"

// AddressSanitizer reads ASAN_OPTIONS from /proc/self/environ, which a Landlock policy never
// grants (a name under one process's /proc directory), so the options are compiled in. Leak
// detection is off: LeakSanitizer stops the threads through ptrace and /proc/<pid>/task, which
// fails under the pruner's strace and under the policy.
extern "C" const char* __asan_default_options() { return "detect_leaks=0"; }

TEST(Ring, KeepsOrder) {
    Ring r(3);
    r.push(1);
    r.push(2);
    EXPECT_EQ(r.contents(), (std::vector<int>{1, 2}));
    EXPECT_EQ(r.pop(), 1);
    EXPECT_EQ(r.size(), 1u);
}

TEST(Ring, DropsTheOldestWhenFull) {
    Ring r(2);
    EXPECT_FALSE(r.push(1));
    EXPECT_FALSE(r.push(2));
    EXPECT_TRUE(r.push(3));
    EXPECT_EQ(r.contents(), (std::vector<int>{2, 3}));
}

TEST(Ring, PopOnEmpty) {
    Ring r(1);
    EXPECT_FALSE(r.pop().has_value());
}

TEST(Ring, ZeroCapacityIsRefused) {
    EXPECT_THROW(Ring(0), std::invalid_argument);
}

TEST(Ring, WrapsManyTimes) {
    Ring r(4);
    for (int i = 0; i < 1000; ++i) r.push(i);
    EXPECT_EQ(r.contents(), (std::vector<int>{996, 997, 998, 999}));
}

// The tester drives a program on a terminal: a line written to the controller comes back on the
// terminal side (prune.json uses_pseudo_terminals).
TEST(Pty, EchoesALine) {
    EXPECT_EQ(ptyEcho("hello terminal"), "hello terminal");
}
