/* The sanitizers' options, compiled into every program of the exercise. They read
 * ASAN_OPTIONS from /proc/self/environ, which a Landlock policy never grants (a name under one
 * process's /proc directory), so under the pruned policy an option set in the environment is not
 * seen. Leak detection is off: LeakSanitizer stops the process's threads through ptrace and
 * /proc/<pid>/task, which fails both under the pruner's strace and under the policy. */
const char *__asan_default_options(void);

const char *__asan_default_options(void)
{
	return "detect_leaks=0";
}
