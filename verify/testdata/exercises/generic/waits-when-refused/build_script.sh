#!/bin/bash
# For `lockstep verify`'s time-outs: a test that, refused its cache in /srv
# (no generic base grants it), waits instead of failing, as a program that
# retries a refused read forever does. Unsandboxed it passes at once; under
# the base it runs into the policy's timeout.
set -euo pipefail
bash tests/run.sh
