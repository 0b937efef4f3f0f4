#!/bin/bash
# Reference exercise "r": Debian's r-base-core and r-cran-testthat. The package is installed into
# ./library and R's temporary files go to ./tmp, so the build writes only in the working directory.
set -euo pipefail
mkdir -p library tmp
export TMPDIR="$PWD/tmp" R_LIBS_USER="$PWD/library"
R CMD INSTALL --no-docs --no-html --no-test-load --library=library . >/dev/null
exec Rscript tests/run.R
