#!/bin/bash
# bench.sh is a heavier, ordinary workload for the parser's throughput
# benchmark: interpreters starting, many files read, pipes, forks, a few
# refusals. It runs inside the Landlock domain capture.sh sets up.
W=/tmp/llcap
/usr/bin/python3 -c 'import json, email.mime.text, http.client, unittest, xml.dom.minidom, asyncio, sqlite3, argparse, logging, decimal, csv, zipfile, tarfile, gzip' 
find /usr/share/perl /usr/lib/python3.11/email -name '*.p[my]' 2>/dev/null | head -400 | xargs grep -c import > /dev/null
for i in 1 2 3 4 5 6 7 8; do sed -n '1,5p' /etc/passwd | awk -F: '{print $1}' | sort | uniq -c > /dev/null; done
tar cf - /usr/share/doc/bash 2>/dev/null | gzip -c | wc -c > $W/rw/size.txt
ls -lR /usr/share/zoneinfo/Europe > /dev/null
cat $W/secret/s.txt 2>/dev/null
/usr/bin/perl -MPOSIX -MData::Dumper -e 'print Dumper([1,2])' > /dev/null
exit 0
