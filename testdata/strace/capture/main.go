// Command capture restricts itself with Landlock (go-landlock, ABI V7 rules)
// and then executes a command, so that strace can record a real Landlock
// domain with refusals in it. It exists only to produce the committed strace
// captures in testdata/strace; capture.sh shows how it is run.
//
// Usage:
//
//	capture [-pre CMD] [-ro DIRS] [-rd DIRS] [-rw DIRS] [-norefer DIRS]
//	        [-rwfile FILES] [-bind PORTS] [-connect PORTS] -- command [args…]
//
// Every list is comma-separated. -ro grants read and execute, -rd read only,
// -rw everything including refer, -norefer everything except refer, -rwfile
// read and write on single files (no ioctl). -pre runs one command (through
// /bin/sh -c) before restricting, so the trace holds calls outside the
// domain too.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

func list(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func main() {
	pre := flag.String("pre", "", "command run before restricting")
	ro := flag.String("ro", "", "read+execute directories")
	rd := flag.String("rd", "", "read-only directories (no execute)")
	rw := flag.String("rw", "", "read-write directories with refer")
	norefer := flag.String("norefer", "", "read-write directories without refer")
	rwfile := flag.String("rwfile", "", "read-write files")
	bind := flag.String("bind", "", "TCP ports that may be bound")
	connect := flag.String("connect", "", "TCP ports that may be connected to")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "capture: no command given")
		os.Exit(2)
	}
	if *pre != "" {
		c := exec.Command("/bin/sh", "-c", *pre)
		c.Stdout, c.Stderr = os.Stdout, os.Stderr
		_ = c.Run() // its failures are what the trace records
	}
	var rules []landlock.Rule
	if d := list(*ro); d != nil {
		rules = append(rules, landlock.RODirs(d...))
	}
	if d := list(*rd); d != nil {
		rules = append(rules, landlock.PathAccess(ll.AccessFSReadFile|ll.AccessFSReadDir, d...))
	}
	if d := list(*rw); d != nil {
		rules = append(rules, landlock.RWDirs(d...).WithRefer())
	}
	if d := list(*norefer); d != nil {
		rules = append(rules, landlock.RWDirs(d...))
	}
	if d := list(*rwfile); d != nil {
		rules = append(rules, landlock.RWFiles(d...))
	}
	for _, p := range list(*bind) {
		n, err := strconv.Atoi(p)
		if err != nil {
			fmt.Fprintf(os.Stderr, "capture: bad port %q\n", p)
			os.Exit(2)
		}
		rules = append(rules, landlock.BindTCP(uint16(n)))
	}
	for _, p := range list(*connect) {
		n, err := strconv.Atoi(p)
		if err != nil {
			fmt.Fprintf(os.Stderr, "capture: bad port %q\n", p)
			os.Exit(2)
		}
		rules = append(rules, landlock.ConnectTCP(uint16(n)))
	}
	if err := landlock.V7.Restrict(rules...); err != nil {
		fmt.Fprintf(os.Stderr, "capture: restrict: %v\n", err)
		os.Exit(125)
	}
	path, err := exec.LookPath(flag.Arg(0))
	if err != nil {
		fmt.Fprintf(os.Stderr, "capture: %v\n", err)
		os.Exit(127)
	}
	err = syscall.Exec(path, flag.Args(), os.Environ())
	fmt.Fprintf(os.Stderr, "capture: exec %s: %v\n", path, err)
	os.Exit(126)
}
