test_that("words are counted case-insensitively", {
  expect_equal(assignment::word_counts("The cat and the hat"), c(and = 1L, cat = 1L, hat = 1L, the = 2L))
})

test_that("empty text has no words", {
  expect_length(assignment::word_counts(""), 0)
  expect_length(assignment::top_words("  ,, "), 0)
})

test_that("the most frequent words come first, ties alphabetically", {
  expect_equal(assignment::top_words("b a c b a b", 2), c("b", "a"))
})

test_that("caesar shifts letters and keeps the rest", {
  expect_equal(assignment::caesar("Hello, World!", 3), "Khoor, Zruog!")
  expect_equal(assignment::caesar(assignment::caesar("abc XYZ", 5), -5), "abc XYZ")
})

test_that("a scratch file round-trips through tempfile() in R's default temporary directory", {
  f <- tempfile(fileext = ".txt")
  on.exit(unlink(f))
  writeLines(assignment::caesar("round trip", 1), f)
  expect_equal(assignment::caesar(readLines(f), -1), "round trip")
})
