#!/bin/bash
# Reference exercise "cpp": Debian's cmake, g++ and libgtest-dev; address and undefined-behaviour
# sanitizers, whose options are compiled into the test program (test/ring_test.cpp says why).
# The build and the program stay inside test/ (compiled_programs_directory).
set -euo pipefail
export TMPDIR="$PWD/test"
cmake -S . -B test/build -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build test/build -j 2
exec test/build/ring_test --gtest_output=xml:test-reports/gtest.xml
