#!/bin/bash
# Reference exercise "c": gcc and make; the programs it compiles run from assignment/.
set -euo pipefail
make --no-print-directory CC=gcc test
