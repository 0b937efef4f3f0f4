/* rpn: evaluate the RPN expression given as arguments and print the result. */
#include <stdio.h>
#include <string.h>

#include "rpn.h"

int main(int argc, char **argv)
{
	char expr[1024] = "";
	long value;

	for (int i = 1; i < argc; i++) {
		if (strlen(expr) + strlen(argv[i]) + 2 > sizeof expr) {
			fputs("rpn: expression too long\n", stderr);
			return 2;
		}
		strcat(expr, argv[i]);
		strcat(expr, " ");
	}
	if (rpn_eval(expr, &value) != 0) {
		fputs("rpn: malformed expression\n", stderr);
		return 1;
	}
	printf("%ld\n", value);
	return 0;
}
