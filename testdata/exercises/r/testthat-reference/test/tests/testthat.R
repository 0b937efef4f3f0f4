# The usual entry point of a package's testthat tests (R CMD check runs it);
# the build script runs the same tests with test_local() instead.
library(testthat)
library(tests)

test_check("tests")
