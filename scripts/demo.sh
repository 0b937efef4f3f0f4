#!/bin/bash
# make demo: what lockstep does, on this machine, in one go.
set -euo pipefail
cd "$(dirname "$0")/.."
bin/lockstep probe
