#include <catch2/catch.hpp>

#include <string>

#include "ring.h"

// The tester drives a program on a terminal: a line written to the controller comes back on the
// terminal side (prune.json uses_pseudo_terminals).
TEST_CASE("Pty echoes a line", "[pty]") {
    CHECK(ptyEcho("hello terminal") == "hello terminal");
}
