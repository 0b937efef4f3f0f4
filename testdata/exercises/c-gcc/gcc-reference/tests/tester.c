/* Drives assignment/caps as a student's program is tested: on a pseudo-terminal (so it sees a
 * terminal and prompts) and on a pipe; writes a JUnit XML report to argv[1]. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "junit.h"

static const char program[] = "./assignment/caps";

struct outcome {
	char out[1024];
	int status;
};

/* drain reads fd until end of file, EIO (a pseudo-terminal's last terminal-side descriptor closed)
 * or 10 s of silence, dropping carriage returns, into o->out. */
static void drain(int fd, struct outcome *o)
{
	size_t n = 0;
	char buf[256];
	struct pollfd p = {.fd = fd, .events = POLLIN};

	while (poll(&p, 1, 10000) > 0) {
		ssize_t got = read(fd, buf, sizeof buf);
		if (got <= 0)
			break;
		for (ssize_t i = 0; i < got && n + 1 < sizeof o->out; i++)
			if (buf[i] != '\r')
				o->out[n++] = buf[i];
	}
	o->out[n] = '\0';
}

static void start(int in, int out)
{
	dup2(in, STDIN_FILENO);
	dup2(out, STDOUT_FILENO);
	dup2(out, STDERR_FILENO);
	execl(program, "caps", (char *)NULL);
	_exit(127);
}

/* on_pty runs the program in a new session whose controlling terminal is a new pseudo-terminal
 * without echo, types input on it, and collects what the program writes. */
static int on_pty(const char *input, struct outcome *o)
{
	struct termios t;
	int m = posix_openpt(O_RDWR | O_NOCTTY), s;
	if (m < 0 || grantpt(m) != 0 || unlockpt(m) != 0)
		return -1;
	const char *name = ptsname(m);
	if (name == NULL || (s = open(name, O_RDWR | O_NOCTTY)) < 0 || tcgetattr(s, &t) != 0)
		return -1;
	t.c_lflag &= ~(tcflag_t)ECHO;
	if (tcsetattr(s, TCSANOW, &t) != 0)
		return -1;
	/* This process keeps its terminal-side descriptor until the program has exec'd (the pipe,
	 * closed on exec, reads end of file): the controller reads EIO while no descriptor is open. */
	int sync[2];
	if (pipe2(sync, O_CLOEXEC) != 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		close(s);
		close(m);
		close(sync[0]);
		setsid();
		s = open(name, O_RDWR); /* a session leader's first terminal becomes its controlling one */
		if (s < 0)
			_exit(126);
		start(s, s);
	}
	close(sync[1]);
	char b;
	while (read(sync[0], &b, 1) > 0)
		;
	close(sync[0]);
	close(s);
	if (pid < 0 || write(m, input, strlen(input)) != (ssize_t)strlen(input))
		return -1;
	drain(m, o);
	close(m);
	return waitpid(pid, &o->status, 0) == pid ? 0 : -1;
}

/* on_pipe runs the program with a pipe as its input and output. */
static int on_pipe(const char *input, struct outcome *o)
{
	int in[2], out[2];
	if (pipe(in) != 0 || pipe(out) != 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		close(in[1]);
		close(out[0]);
		start(in[0], out[1]);
	}
	close(in[0]);
	close(out[1]);
	if (pid < 0 || write(in[1], input, strlen(input)) != (ssize_t)strlen(input))
		return -1;
	close(in[1]);
	drain(out[0], o);
	close(out[0]);
	return waitpid(pid, &o->status, 0) == pid ? 0 : -1;
}

static void expect(const char *name, int (*run)(const char *, struct outcome *), const char *input, const char *want)
{
	struct outcome o = {0};
	char msg[256];
	int err = run(input, &o);
	int exited0 = WIFEXITED(o.status) && WEXITSTATUS(o.status) == 0;

	if (err != 0)
		snprintf(msg, sizeof msg, "could not run %s: %s", program, strerror(errno));
	else
		snprintf(msg, sizeof msg, "wrote \"%.80s\" and ended with status %#x, want \"%.80s\" and status 0", o.out, o.status, want);
	check(name, err == 0 && exited0 && strcmp(o.out, want) == 0, msg);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fputs("usage: tester REPORT.xml\n", stderr);
		return 2;
	}
	expect("prompts_on_a_terminal", on_pty, "quit\n", "> ");
	expect("upper_cases_a_line_on_a_terminal", on_pty, "hello pty world\nquit\n", "> HELLO PTY WORLD (3)\n> ");
	expect("ends_at_end_of_input_on_a_terminal", on_pty, "abc\n\004", "> ABC (1)\n> ");
	expect("does_not_prompt_on_a_pipe", on_pipe, "a b\nc\n", "A B (2)\nC (1)\n");
	return junit_write(argv[1], "caps");
}
