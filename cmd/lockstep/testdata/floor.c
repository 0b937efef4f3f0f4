/* The floor for `lockstep run`: the least a Landlock launcher must do.
 * BenchmarkRunTrue compiles it with cc into the cache and passes it the
 * ruleset `lockstep run` would apply (enforcer.Prepare):
 *   floor <handled_fs> <handled_net> <scoped> [<access>:<path>]... -- cmd...
 * It creates the ruleset, adds one path rule per argument, sets
 * no_new_privs, restricts itself and execs. Nothing else. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

struct ruleset_attr { uint64_t fs, net, scoped; };
struct __attribute__((packed)) path_beneath { uint64_t allowed; int32_t fd; };

int main(int argc, char **argv) {
	if (argc < 5) return 2;
	struct ruleset_attr a = { strtoull(argv[1], 0, 0), strtoull(argv[2], 0, 0), strtoull(argv[3], 0, 0) };
	int rs = syscall(SYS_landlock_create_ruleset, &a, sizeof a, 0), i = 4;
	if (rs < 0) return 3;
	for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
		char *path;
		struct path_beneath pb = { strtoull(argv[i], &path, 0), -1 };
		if ((pb.fd = open(path + 1, O_PATH | O_CLOEXEC)) < 0) return 4;
		if (syscall(SYS_landlock_add_rule, rs, 1 /* PATH_BENEATH */, &pb, 0)) return 5;
		close(pb.fd);
	}
	if (i + 1 >= argc || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || syscall(SYS_landlock_restrict_self, rs, 0)) return 6;
	execv(argv[i + 1], argv + i + 1);
	return 127;
}
