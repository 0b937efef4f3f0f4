/* Unit tests of the caps program's line helpers; writes a JUnit XML report to argv[1]. */
#include <stdio.h>
#include <string.h>

#include "../assignment/text.h"
#include "junit.h"

static void expect_caps(const char *name, const char *in, const char *want)
{
	char buf[64], msg[256];
	snprintf(buf, sizeof buf, "%s", in);
	caps_line(buf);
	snprintf(msg, sizeof msg, "caps_line(\"%s\") = \"%s\", want \"%s\"", in, buf, want);
	check(name, strcmp(buf, want) == 0, msg);
}

static void expect_words(const char *name, const char *in, size_t want)
{
	char msg[256];
	size_t got = count_words(in);
	snprintf(msg, sizeof msg, "count_words(\"%s\") = %zu, want %zu", in, got, want);
	check(name, got == want, msg);
}

static void expect_chomp(const char *name, const char *in, const char *want)
{
	char buf[64], msg[256];
	snprintf(buf, sizeof buf, "%s", in);
	chomp(buf);
	snprintf(msg, sizeof msg, "chomp gave \"%s\", want \"%s\"", buf, want);
	check(name, strcmp(buf, want) == 0, msg);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fputs("usage: unit REPORT.xml\n", stderr);
		return 2;
	}
	expect_caps("upper_cases_letters", "Hello, World 42", "HELLO, WORLD 42");
	expect_caps("leaves_an_empty_line", "", "");
	expect_words("counts_words", "one two  three", 3);
	expect_words("counts_no_words_in_blanks", " \t ", 0);
	expect_chomp("chomps_a_newline", "line\n", "line");
	expect_chomp("chomps_a_carriage_return", "line\r\n", "line");
	return junit_write(argv[1], "text");
}
