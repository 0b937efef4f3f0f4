#!/bin/bash
# Maven 3.8 offline on Debian's repository, JUnit 4 through Surefire 2.22.3. The repository is
# copied into the working directory first, links resolved, so nothing outside it is written.
set -euo pipefail
cp -rL /usr/share/maven-repo .m2-repo
exec mvn -o -B -Dmaven.repo.local="$PWD/.m2-repo" ${MAVEN_ARGS:-} test
