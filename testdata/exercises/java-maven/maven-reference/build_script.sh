#!/bin/bash
# Reference exercise "java-maven", built as a Maven grading build builds one (README.md): Artemis's
# `mvn clean test` as Phobos's Maven exercise runs it, offline and in batch mode, on Maven's
# default local repository ~/.m2/repository (the user's home from the password database, /root
# for root), which make toolchains fills with a copy of Debian's Maven repository. Surefire
# writes its reports where it does by default, target/surefire-reports/.
set -euo pipefail
exec mvn --offline --batch-mode test
