/* A JUnit XML report for the test programs: check() records a case, junit_write() writes the
 * report and prints one line per case. Header-only: each test program includes it once. */
#ifndef JUNIT_H
#define JUNIT_H
#include <stdio.h>

struct junit_case {
	const char *name;
	int ok;
	char message[256];
};

static struct junit_case junit_cases[32];
static int junit_count;

/* check records the case name as passed when ok, else as failed with message. */
static void check(const char *name, int ok, const char *message)
{
	struct junit_case *c = &junit_cases[junit_count++];
	c->name = name;
	c->ok = ok;
	if (!ok)
		snprintf(c->message, sizeof c->message, "%s", message);
}

static void junit_escaped(FILE *f, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '&': fputs("&amp;", f); break;
		case '"': fputs("&quot;", f); break;
		case '\r': fputs("\\r", f); break;
		default: fputc(*s, f);
		}
	}
}

/* junit_write writes the report of suite to path; it returns the exit status: 0 when every
 * case passed, 1 when one failed, 2 when the report cannot be written. */
static int junit_write(const char *path, const char *suite)
{
	int failures = 0;
	FILE *f = fopen(path, "w");
	if (f == NULL) {
		perror(path);
		return 2;
	}
	for (int i = 0; i < junit_count; i++)
		failures += !junit_cases[i].ok;
	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
	fprintf(f, "<testsuite name=\"%s\" tests=\"%d\" failures=\"%d\" errors=\"0\" skipped=\"0\">\n",
		suite, junit_count, failures);
	for (int i = 0; i < junit_count; i++) {
		struct junit_case *c = &junit_cases[i];
		printf("%s::%s %s\n", suite, c->name, c->ok ? "PASSED" : "FAILED");
		fprintf(f, "  <testcase classname=\"%s\" name=\"%s\"", suite, c->name);
		if (c->ok) {
			fputs("/>\n", f);
			continue;
		}
		printf("  %s\n", c->message);
		fputs("><failure message=\"assertion\">", f);
		junit_escaped(f, c->message);
		fputs("</failure></testcase>\n", f);
	}
	fputs("</testsuite>\n", f);
	if (fclose(f) != 0) {
		perror(path);
		return 2;
	}
	return failures > 0;
}

#endif
