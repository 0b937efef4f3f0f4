#!/bin/bash
# A Gradle build with JUnit 4 tests: one passes, one expects an exception, one fails on purpose, one is skipped.
set -euo pipefail
exec gradle --offline --console=plain --no-daemon test
