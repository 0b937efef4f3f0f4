/* Line helpers of the caps program: upper-casing and word counting. */
#ifndef TEXT_H
#define TEXT_H
#include <stddef.h>

/* caps_line upper-cases the ASCII letters of s in place and returns s. */
char *caps_line(char *s);
/* count_words counts the runs of non-blank characters in s. */
size_t count_words(const char *s);
/* chomp removes one trailing "\n" or "\r\n" from s and returns its new length. */
size_t chomp(char *s);

#endif
