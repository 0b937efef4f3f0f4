#!/bin/bash
# Reference exercise "python": Debian's python3 and python3-pytest; JUnit XML via --junitxml.
set -euo pipefail
exec python3 -m pytest -v -p no:cacheprovider --junitxml=test-reports/pytest.xml tests
