/* caps: reads lines and writes each upper-cased with its word count; on a terminal it prompts
 * with "> " first. "quit" ends it with status 0, as does the end of input. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "text.h"

int main(void)
{
	char line[256];
	int tty = isatty(STDIN_FILENO);

	setvbuf(stdout, NULL, _IONBF, 0);
	for (;;) {
		if (tty)
			fputs("> ", stdout);
		if (fgets(line, sizeof line, stdin) == NULL)
			return 0;
		chomp(line);
		if (strcmp(line, "quit") == 0)
			return 0;
		printf("%s (%zu)\n", caps_line(line), count_words(line));
	}
}
