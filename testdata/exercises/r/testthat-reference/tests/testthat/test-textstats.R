test_that("words are counted case-insensitively", {
  expect_equal(word_counts("The cat and the hat"), c(and = 1L, cat = 1L, hat = 1L, the = 2L))
})

test_that("empty text has no words", {
  expect_length(word_counts(""), 0)
  expect_length(top_words("  ,, "), 0)
})

test_that("the most frequent words come first, ties alphabetically", {
  expect_equal(top_words("b a c b a b", 2), c("b", "a"))
})

test_that("caesar shifts letters and keeps the rest", {
  expect_equal(caesar("Hello, World!", 3), "Khoor, Zruog!")
  expect_equal(caesar(caesar("abc XYZ", 5), -5), "abc XYZ")
})

test_that("a scratch file round-trips through tempfile()", {
  f <- tempfile(fileext = ".txt")
  on.exit(unlink(f))
  writeLines(caesar("round trip", 1), f)
  expect_equal(caesar(readLines(f), -1), "round trip")
})
