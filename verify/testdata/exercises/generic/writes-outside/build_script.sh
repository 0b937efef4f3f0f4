#!/bin/bash
# Broken on purpose for `lockstep verify`: a test keeps a cache in /srv, which
# no generic base grants, so it passes unsandboxed and fails under the base.
set -euo pipefail
bash tests/run.sh
