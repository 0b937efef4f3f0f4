#!/bin/bash
# Reads data/greeting.txt and binds 127.0.0.1:6000/udp; JUnit XML in test-reports/.
set -euo pipefail
exec python3 -S tests/run_tests.py
