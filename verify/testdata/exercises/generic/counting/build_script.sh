#!/bin/bash
# A second generic exercise: coreutils and awk only, its own JUnit report.
set -euo pipefail
bash tests/run.sh
