#include <ctype.h>
#include <string.h>

#include "text.h"

char *caps_line(char *s)
{
	for (char *p = s; *p; p++)
		*p = (char)toupper((unsigned char)*p);
	return s;
}

size_t count_words(const char *s)
{
	size_t n = 0;
	int in = 0;
	for (; *s; s++) {
		int blank = isspace((unsigned char)*s);
		n += !blank && !in;
		in = !blank;
	}
	return n;
}

size_t chomp(char *s)
{
	size_t n = strlen(s);
	if (n > 0 && s[n - 1] == '\n')
		s[--n] = '\0';
	if (n > 0 && s[n - 1] == '\r')
		s[--n] = '\0';
	return n;
}
