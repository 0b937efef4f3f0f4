"""A consumer's exercise: one test reads a file, one binds 127.0.0.1:6000/udp (refused on
Landlock ABI 10 unless the policy has `[bind] allow 6000 udp`). JUnit XML in test-reports/."""

import os
import socket
import sys
import xml.etree.ElementTree as ET

PORT = 6000


def test_reads_greeting():
    with open("data/greeting.txt", encoding="utf-8") as f:
        assert f.read() == "hello from the consumer\n"


def test_binds_udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind(("127.0.0.1", PORT))
        assert s.getsockname()[1] == PORT
    finally:
        s.close()


def main():
    tests = [test_reads_greeting, test_binds_udp]
    suite = ET.Element("testsuite", name="udp-listener", tests=str(len(tests)))
    failures = 0
    for test in tests:
        case = ET.SubElement(suite, "testcase", classname="listener", name=test.__name__)
        try:
            test()
            print(f"{test.__name__} PASSED", flush=True)
        except Exception as e:  # every failure is reported
            failures += 1
            print(f"{test.__name__} FAILED: {e!r}", flush=True)
            ET.SubElement(case, "failure", message=repr(e))
    suite.set("failures", str(failures))
    os.makedirs("test-reports", exist_ok=True)
    ET.ElementTree(suite).write("test-reports/listener.xml", encoding="utf-8", xml_declaration=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
