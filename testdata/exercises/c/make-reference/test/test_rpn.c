/* Unit tests of rpn_eval; writes a JUnit XML report to the path in argv[1]. */
#include <stdio.h>
#include <string.h>

#include "../assignment/rpn.h"

struct result {
	const char *name;
	int ok;
	char message[128];
};

static struct result results[32];
static int count;

static void expect_value(const char *name, const char *expr, long want)
{
	struct result *r = &results[count++];
	long got = 0;
	r->name = name;
	r->ok = rpn_eval(expr, &got) == 0 && got == want;
	if (!r->ok)
		snprintf(r->message, sizeof r->message, "rpn_eval(\"%s\") = %ld, want %ld", expr, got, want);
}

static void expect_error(const char *name, const char *expr)
{
	struct result *r = &results[count++];
	long got = 0;
	r->name = name;
	r->ok = rpn_eval(expr, &got) != 0;
	if (!r->ok)
		snprintf(r->message, sizeof r->message, "rpn_eval(\"%s\") succeeded, want an error", expr);
}

int main(int argc, char **argv)
{
	int failures = 0;
	FILE *f;

	if (argc != 2) {
		fputs("usage: test_rpn REPORT.xml\n", stderr);
		return 2;
	}
	expect_value("adds", "1 2 +", 3);
	expect_value("multiplies_before_adding", "2 3 4 * +", 14);
	expect_value("handles_negative_numbers", "-4 6 +", 2);
	expect_value("divides_integers", "7 2 /", 3);
	expect_error("refuses_division_by_zero", "1 0 /");
	expect_error("refuses_missing_operand", "1 +");
	expect_error("refuses_leftover_operands", "1 2");

	f = fopen(argv[1], "w");
	if (f == NULL) {
		perror(argv[1]);
		return 2;
	}
	for (int i = 0; i < count; i++)
		failures += !results[i].ok;
	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
	fprintf(f, "<testsuite name=\"rpn\" tests=\"%d\" failures=\"%d\" errors=\"0\" skipped=\"0\">\n", count, failures);
	for (int i = 0; i < count; i++) {
		printf("rpn::%s %s\n", results[i].name, results[i].ok ? "PASSED" : "FAILED");
		if (results[i].ok) {
			fprintf(f, "  <testcase classname=\"rpn\" name=\"%s\"/>\n", results[i].name);
		} else {
			printf("  %s\n", results[i].message);
			fprintf(f, "  <testcase classname=\"rpn\" name=\"%s\"><failure message=\"assertion\">", results[i].name);
			for (const char *c = results[i].message; *c; c++) {
				switch (*c) {
				case '<': fputs("&lt;", f); break;
				case '>': fputs("&gt;", f); break;
				case '&': fputs("&amp;", f); break;
				case '"': fputs("&quot;", f); break;
				default: fputc(*c, f);
				}
			}
			fprintf(f, "</failure></testcase>\n");
		}
	}
	fprintf(f, "</testsuite>\n");
	if (fclose(f) != 0) {
		perror(argv[1]);
		return 2;
	}
	printf("%d tests, %d failed\n", count, failures);
	return failures != 0;
}
