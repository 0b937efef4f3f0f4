# Runs the tests of the package installed in ./library with testthat's JUnit reporter.
# (test_dir runs in tests/testthat, so the report path is absolute.)
library(testthat)
library(textstats, lib.loc = "library")
dir.create("test-reports", showWarnings = FALSE)
reporter <- MultiReporter$new(list(
  ProgressReporter$new(show_praise = FALSE),
  JunitReporter$new(file = file.path(getwd(), "test-reports", "testthat.xml"))
))
results <- test_dir("tests/testthat", reporter = reporter, stop_on_failure = FALSE, load_package = "none",
                    env = new.env(parent = asNamespace("textstats")))
if (any(as.data.frame(results)$failed > 0)) quit(status = 1)
