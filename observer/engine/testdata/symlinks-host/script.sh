#!/bin/bash
# The symlink capture's command (README.md): each access names its object through a
# link the kernel resolves, or through no link at all where that is the point.
cd /var/tmp/lockstep-symlinks || exit 2
cat /proc/mounts                          # /proc/mounts -> self/mounts
cat /proc/self/mountinfo                  # /proc/self is the reading process
cat /proc/thread-self/stat                # /proc/thread-self is <tgid>/task/<tid>
cat /lib/os-release                       # /lib -> usr/lib, a library directory behind a link
ln -s /tmp/lockstep-symlinks-target dangling
echo x >dangling                          # a create through a dangling link
ln -s loop loop
cat loop                                  # ELOOP: no refusal, no record
exit 0
