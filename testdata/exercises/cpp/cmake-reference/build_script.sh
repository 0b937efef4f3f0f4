#!/bin/bash
# Reference exercise "cpp": Debian's cmake, g++ and libgtest-dev; address and undefined-behaviour
# sanitizers. Leak detection is off: LeakSanitizer aborts under ptrace, which the pruner observes
# with. The build and the program stay inside test/ (compiled_programs_directory).
set -euo pipefail
export ASAN_OPTIONS=detect_leaks=0 TMPDIR="$PWD/test"
cmake -S . -B test/build -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build test/build -j 2
exec test/build/ring_test --gtest_output=xml:test-reports/gtest.xml
