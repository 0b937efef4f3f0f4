#include "rpn.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define STACK_MAX 64

int rpn_eval(const char *expr, long *out)
{
	long stack[STACK_MAX];
	int depth = 0;
	const char *p = expr;

	while (*p) {
		if (isspace((unsigned char)*p)) {
			p++;
			continue;
		}
		if (isdigit((unsigned char)*p) || (*p == '-' && isdigit((unsigned char)p[1]))) {
			char *end;
			if (depth == STACK_MAX)
				return -1;
			stack[depth++] = strtol(p, &end, 10);
			p = end;
			continue;
		}
		if (strchr("+-*/", *p) == NULL || depth < 2)
			return -1;
		long b = stack[--depth], a = stack[--depth];
		switch (*p) {
		case '+': stack[depth++] = a + b; break;
		case '-': stack[depth++] = a - b; break;
		case '*': stack[depth++] = a * b; break;
		case '/':
			if (b == 0)
				return -1;
			stack[depth++] = a / b;
			break;
		}
		p++;
	}
	if (depth != 1)
		return -1;
	*out = stack[0];
	return 0;
}
