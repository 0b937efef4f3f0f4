#' Counts of each lower-cased word of text, sorted by word.
word_counts <- function(text) {
  words <- tolower(unlist(strsplit(text, "[^A-Za-z']+")))
  words <- words[nzchar(words)]
  if (length(words) == 0) {
    return(integer(0))
  }
  counts <- table(words)
  stats::setNames(as.integer(counts), names(counts))
}

#' The n most frequent words, ties broken alphabetically.
top_words <- function(text, n = 3) {
  counts <- word_counts(text)
  if (length(counts) == 0) {
    return(character(0))
  }
  ordered <- names(counts)[order(-counts, names(counts))]
  utils::head(ordered, n)
}

#' Shift every ASCII letter of text by k places, keeping case.
caesar <- function(text, k) {
  shift <- function(chars, base) {
    codes <- utf8ToInt(chars)
    intToUtf8((codes - base + k) %% 26 + base, multiple = TRUE)
  }
  chars <- strsplit(text, "")[[1]]
  upper <- grepl("[A-Z]", chars)
  lower <- grepl("[a-z]", chars)
  chars[upper] <- vapply(chars[upper], shift, "", base = 65L)
  chars[lower] <- vapply(chars[lower], shift, "", base = 97L)
  paste(chars, collapse = "")
}
