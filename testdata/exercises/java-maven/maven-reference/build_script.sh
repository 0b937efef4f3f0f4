#!/bin/bash
# Reference exercise "java-maven": Debian's maven (3.8) and openjdk-17-jdk-headless, offline on
# Debian's Maven repository /usr/share/maven-repo, read in place (prune.json pins it).
set -euo pipefail
exec mvn -o -B -Dstyle.color=never -Dmaven.repo.local=/usr/share/maven-repo test
