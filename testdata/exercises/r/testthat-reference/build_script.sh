#!/bin/bash
# Reference exercise "r", laid out and built as Artemis's R grading build lays out and builds one:
# the solution package in assignment/, the test package in test/, which names the solution as the
# local remote ./assignment (so the solution is copied into it first). The phases: install the
# test package with remotes::install_local() (which builds both packages with R CMD build and
# installs each with a staged install: rlib/00LOCK-<package>/00new, then a rename into rlib/),
# parse every R file, run the tests with testthat's JUnit reporter (test_local writes
# test/tests/testthat/junit.xml). R's temporary directory is its default (TMPDIR unset: /tmp);
# the only change from the grader's defaults is the library, rlib/ in the working directory
# (R_LIBS_USER), since a submission must not write into the system's site library.
set -euo pipefail
export R_LIBS_USER="$PWD/rlib"
mkdir -p "$R_LIBS_USER"
cp -R assignment test/assignment
cd test
Rscript -e 'remotes::install_local()'
Rscript -e 'for (f in list.files(".", pattern = "\\.[Rr]$", recursive = TRUE, full.names = TRUE)) invisible(parse(f, keep.source = FALSE))'
exec Rscript -e 'library(testthat); options(testthat.output_file = "junit.xml"); test_local(".", reporter = "junit")'
