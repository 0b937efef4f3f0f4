#!/bin/bash
# Reference exercise "python", built as Artemis's Python grading build builds one (README.md): the
# template's two phases as they are, every byte-compiled file written (python3 -m compileall) and
# then pytest with its defaults, found on PATH (Debian's /usr/bin/pytest), writing the JUnit report
# test-reports/results.xml. pytest's cache (.pytest_cache) lands in the working directory and its
# tmp_path directories under /tmp/pytest-of-<user>, where pytest puts them by default.
set -u
python3 -m compileall . -q || exit 1
pytest --junitxml=test-reports/results.xml
