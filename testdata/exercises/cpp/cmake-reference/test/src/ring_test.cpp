#include <catch2/catch.hpp>

#include <stdexcept>
#include <thread>
#include <vector>

#include "ring.h"

TEST_CASE("Ring keeps order", "[ring]") {
    Ring r(3);
    r.push(1);
    r.push(2);
    CHECK(r.contents() == std::vector<int>{1, 2});
    CHECK(r.pop() == 1);
    CHECK(r.size() == 1u);
}

TEST_CASE("Ring drops the oldest when full", "[ring]") {
    Ring r(2);
    CHECK_FALSE(r.push(1));
    CHECK_FALSE(r.push(2));
    CHECK(r.push(3));
    CHECK(r.contents() == std::vector<int>{2, 3});
}

TEST_CASE("Ring pop on empty", "[ring]") {
    Ring r(1);
    CHECK_FALSE(r.pop().has_value());
}

// The exception is thrown on a thread of its own. Before a throw AddressSanitizer clears the
// shadow of the stack being unwound, which needs the thread's stack bounds: a new thread's come
// from its pthread attributes, the main thread's only from /proc/self/maps, which a Landlock
// policy never grants. On the main thread the unwound frames' redzones stayed poisoned, and a
// later write to them (the test runner writing its report) was reported as a
// stack-buffer-overflow, a false positive of any sandboxed run. Catch2's assertions are not
// thread-safe, so the thread only records what it caught.
TEST_CASE("Ring refuses zero capacity", "[ring]") {
    bool refused = false;
    std::thread t([&refused] {
        try {
            Ring r(0);
        } catch (const std::invalid_argument&) {
            refused = true;
        }
    });
    t.join();
    CHECK(refused);
}

TEST_CASE("Ring wraps many times", "[ring]") {
    Ring r(4);
    for (int i = 0; i < 1000; ++i) r.push(i);
    CHECK(r.contents() == std::vector<int>{996, 997, 998, 999});
}
