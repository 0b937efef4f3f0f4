# Captures trace: less on a fresh pseudo-terminal (its controlling
# terminal, so less opens /dev/tty, descriptor 3) under strace with the
# options `lockstep record run` uses (evidence/strace.Command), quit with q.
#     python3 recorder/testdata/less/capture.py
import os, pty, time

here = os.path.dirname(os.path.abspath(__file__))
pid, fd = pty.fork()
if pid == 0:
    os.environ["TERM"] = "xterm"
    os.execvp("strace", ["strace", "-f", "-qq", "-y", "-s", "4096", "-e",
                         "trace=%file,%network,%process,%desc,landlock_restrict_self,setsid,setpgid,ioctl",
                         "-o", os.path.join(here, "trace"), "less", "/etc/hostname"])
time.sleep(2)
os.write(fd, b"q")
try:
    while os.read(fd, 4096):
        pass
except OSError:
    pass
print(os.waitpid(pid, 0))
