#!/bin/bash
# basic.sh runs inside the Landlock domain that capture.sh sets up; every
# line is one access, some allowed by the domain, some refused by it, some
# failing for reasons that are not Landlock's. Errors are expected: the
# script never stops on one.
W=/tmp/llcap
cat $W/ro/a.txt                            # allowed read
cat $W/secret/s.txt                        # refused: read_file
ls $W/secret                               # refused: read_dir
echo x > $W/ro/a.txt                       # refused: write_file (O_TRUNC on an existing file)
echo x > $W/ro/new.txt                     # refused: make_reg on $W/ro (O_CREAT of a missing file)
echo x >> $W/rd/b.txt                      # refused: write_file (O_APPEND)
mkdir $W/ro/d                              # refused: make_dir
rm -f $W/ro/a.txt                          # refused: remove_file
rmdir $W/ro/sub                            # refused: remove_dir
ln -s a.txt $W/ro/link                     # refused: make_sym
mkfifo $W/ro/fifo                          # refused: make_fifo
truncate -s 0 $W/rd/b.txt                  # refused: write_file/truncate
touch $W/rw/made.txt                       # allowed create
mv $W/rw/made.txt $W/rw2/moved.txt         # allowed rename across directories (refer granted)
touch $W/norefer/x.txt                     # allowed create
mv $W/norefer/x.txt $W/rw/x.txt            # refused: refer (EXDEV), mv falls back to copy + unlink
mv $W/ro/c.txt $W/rw/c.txt                 # refused: rename out of a read-only directory
$W/rd/tool.sh                              # refused: execute (directory granted read only)
$W/ro/noexec.txt                           # not Landlock: the file has no execute bit
cat /nonexistent/file                      # not a refusal: ENOENT
cat /proc/self/status > /dev/null          # refused: /proc is not granted
stty -F /dev/null                          # refused: ioctl_dev on /dev/null
(cat $W/secret/s.txt) &                    # refused inside a forked child
wait
( ulimit -n 8; exec 3</dev/null 4</dev/null 5</dev/null 6</dev/null 7</dev/null 8</dev/null ) # EMFILE
( ulimit -f 1; trap '' XFSZ; head -c 4096 /dev/zero > $W/rw/big.bin ) # EFBIG
( ulimit -v 60000; /usr/bin/python3 -c 'x = bytearray(200 * 1024 * 1024)' ) 2>/dev/null # ENOMEM
/usr/bin/python3 - <<'PY'
import os, socket, threading

def in_thread():
    try:
        open("/tmp/llcap/secret/s.txt")
    except OSError as e:
        print("thread:", e)

t = threading.Thread(target=in_thread)
t.start()
t.join()

srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", 40101))               # allowed bind
srv.listen()
c = socket.socket()
c.connect(("127.0.0.1", 40101))              # allowed connect
for what, fn in [
    ("bind 40102", lambda s: s.bind(("127.0.0.1", 40102))),        # refused bind_tcp
    ("connect 40103", lambda s: s.connect(("127.0.0.1", 40103))),  # refused connect_tcp
]:
    s = socket.socket()
    try:
        fn(s)
    except OSError as e:
        print(what, e)
s6 = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
try:
    s6.connect(("::1", 40103))                # refused connect_tcp (IPv6)
except OSError as e:
    print("connect6", e)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.bind(("127.0.0.1", 40104))                 # UDP is not handled at ABI 7: allowed
u.sendto(b"x", ("127.0.0.1", 40105))
us = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    us.bind("/tmp/llcap/ro/sock")            # refused: make_sock on the parent
except OSError as e:
    print("unix bind", e)
try:
    os.rename("/tmp/llcap/norefer/y.txt", "/tmp/llcap/rw/y.txt")  # refused: refer, EXDEV
except OSError as e:
    print("rename", e)
PY
exit 0
