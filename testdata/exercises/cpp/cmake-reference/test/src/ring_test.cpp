#include <gtest/gtest.h>

#include <stdexcept>
#include <thread>
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

// The exception is thrown on a thread of its own. Before a throw AddressSanitizer clears the
// shadow of the stack being unwound, which needs the thread's stack bounds: a new thread's come
// from its pthread attributes, the main thread's only from /proc/self/maps, which a Landlock
// policy never grants. On the main thread the unwound frames' redzones stayed poisoned and
// GoogleTest, which is not instrumented, later tripped over them writing its report
// (stack-buffer-overflow in XmlUnitTestResultPrinter), a false positive of any sandboxed run.
TEST(Ring, ZeroCapacityIsRefused) {
    bool refused = false;
    std::thread t([&refused] {
        try {
            Ring r(0);
        } catch (const std::invalid_argument&) {
            refused = true;
        }
    });
    t.join();
    EXPECT_TRUE(refused);
}

TEST(Ring, WrapsManyTimes) {
    Ring r(4);
    for (int i = 0; i < 1000; ++i) r.push(i);
    EXPECT_EQ(r.contents(), (std::vector<int>{996, 997, 998, 999}));
}
