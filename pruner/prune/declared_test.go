package prune

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lockstep-sandbox/lockstep/exercise"
)

// The stand-in for a host outside the run: a name that looks external,
// resolved through /etc/hosts to a documentation address (RFC 5737's
// TEST-NET-3, never routed) that the test puts on the loopback interface of
// a network namespace of its own. Not 127.0.0.1: the pruner grants a refused
// loopback destination exactly (a local service), so only a non-loopback
// address can show the abort on a host nobody declared.
const (
	standInName = "pkgs.lockstep.test"
	standInAddr = "203.0.113.10"
)

// standInEnv marks the test binary re-executed inside the private network
// and mount namespaces; standInBinEnv hands it the lockstep binary the
// outer test built.
const (
	standInEnv    = "LOCKSTEP_TEST_STAND_IN_NAMESPACE"
	standInBinEnv = "LOCKSTEP_TEST_LOCKSTEP_BINARY"
)

// tlsServer answers every line with "pong" over TLS on standInAddr until the
// test ends, with a certificate for standInName made now; it returns the
// port and the certificate in PEM, which the client trusts alone.
func tlsServer(t *testing.T) (int, []byte) {
	t.Helper()
	cert, certPEM := standInCertificate(t)
	l, err := tls.Listen("tcp", standInAddr+":0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := bufio.NewReader(c).ReadString('\n'); err == nil {
					fmt.Fprintln(c, "pong")
				}
			}()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port, certPEM
}

// standInCertificate is a self-signed certificate for standInName, valid
// for an hour, usable as its own trust anchor.
func standInCertificate(t *testing.T) (tls.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: standInName},
		DNSNames: []string{standInName}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// tlsClient talks to the stand-in by name and checks the certificate
// against that name, so the run passes only when /etc/hosts led it there.
const tlsClient = `import socket, ssl, sys
host, port = sys.argv[1], int(sys.argv[2])
ctx = ssl.create_default_context(cafile="ca.pem")
with socket.create_connection((host, port), timeout=20) as s:
    with ctx.wrap_socket(s, server_hostname=host) as c:
        c.sendall(b"ping\n")
        line = c.makefile().readline()
sys.exit(0 if line == "pong\n" else 1)
`

// declaredExercise is an exercise that declares the given hosts and, when
// connects, talks TLS to the stand-in by name on port.
func declaredExercise(t *testing.T, port int, certPEM []byte, connects bool, declared []string) *exercise.Exercise {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "net", "declared")
	talk := ""
	if connects {
		talk = fmt.Sprintf("/usr/bin/python3 -S client.py %s %d\n", standInName, port)
	}
	write(t, filepath.Join(dir, "build_script.sh"), "#!/bin/bash\nset -euo pipefail\n"+talk+
		"printf '<testsuite name=\"net\" tests=\"1\"><testcase classname=\"net\" name=\"talks\"/></testsuite>\\n' > test-reports/net.xml\n", 0o755)
	write(t, filepath.Join(dir, "client.py"), tlsClient, 0o644)
	write(t, filepath.Join(dir, "ca.pem"), string(certPEM), 0o644)
	write(t, filepath.Join(dir, "test-reports", ".keep"), "", 0o644)
	cfg, _ := json.Marshal(map[string]any{"report_globs": []string{"test-reports/*.xml"}, "declared_hosts": declared})
	write(t, filepath.Join(dir, "prune.json"), string(cfg), 0o644)
	ex, err := exercise.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return ex
}

// TestHostDeclaredHost: a declared host's [connect] rule stays when the
// build talks to it by name (removing it fails the run), is minimised away
// when it does not, and a build that talks to a host nobody declared
// aborts the prune. The test re-executes itself in a network and mount
// namespace of its own, where standInName resolves to standInAddr through
// a private /etc/hosts; this machine's network and /etc/hosts stay as they
// were.
func TestHostDeclaredHost(t *testing.T) {
	needHost(t)
	if os.Getenv(standInEnv) == "" {
		runInStandInNamespace(t)
		return
	}
	enterStandIn(t)
	t.Setenv("LOCKSTEP_DISPOSABLE", "1")
	port, certPEM := tlsServer(t)
	declared := fmt.Sprintf("%s:%d", standInName, port)
	rule := "allow " + declared
	for _, c := range []struct {
		name      string
		connects  bool
		declared  []string
		kept      bool
		abortedBy string
	}{
		{"kept when the build needs it", true, []string{declared}, true, ""},
		{"dropped when it does not", false, []string{declared}, false, ""},
		{"aborted on a host nobody declared", true, []string{}, false, fmt.Sprintf("needs external network: undeclared %s:%d tcp", standInAddr, port)},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts := hostOptions(t)
			opts.SkipContainment, opts.SkipLimits = true, true
			opts.BaselineRuns, opts.VerificationRuns = 1, 1
			res, err := Prune(t.Context(), declaredExercise(t, port, certPEM, c.connects, c.declared), opts)
			if err != nil {
				t.Fatal(err)
			}
			if c.abortedBy != "" {
				if res.Aborted == nil {
					t.Fatalf("prune gave a policy, want it aborted (%q):\n%s", c.abortedBy, res.Cfg)
				}
				if !strings.Contains(res.Aborted.Aborted, c.abortedBy) {
					t.Fatalf("prune aborted: %q, want %q", res.Aborted.Aborted, c.abortedBy)
				}
				return
			}
			if res.Aborted != nil {
				t.Fatalf("aborted: %s", res.Aborted.Aborted)
			}
			var rules []string
			for _, r := range res.Policy.Connect {
				rules = append(rules, r.String())
			}
			if has := strings.Contains(strings.Join(rules, "\n"), rule); has != c.kept {
				t.Errorf("[connect] %v, want %q there: %v\n%s", rules, rule, c.kept, res.Cfg)
			}
			t.Logf("the pruned policy:\n%s", res.Cfg)
		})
	}
}

// runInStandInNamespace runs this test again under unshare(1) in new
// network and mount namespaces (mounts private, so nothing propagates back)
// and fails unless each of its subtests passed there.
func runInStandInNamespace(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the stand-in host needs root: a network namespace and a bind mount over its /etc/hosts")
	}
	for _, tool := range []string{"unshare", "ip", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (scripts/deps.sh installs it)", tool)
		}
	}
	cmd := exec.CommandContext(t.Context(), "unshare", "--net", "--mount", "--propagation", "private", "--",
		os.Args[0], "-test.run", "^"+t.Name()+"$", "-test.count=1", "-test.v", "-test.timeout=0")
	cmd.Env = append(os.Environ(), standInEnv+"=1", standInBinEnv+"="+lockstepBinary(t))
	for _, ns := range []string{"net", "mnt"} {
		id, err := os.Readlink("/proc/self/ns/" + ns)
		if err != nil {
			t.Fatal(err)
		}
		cmd.Env = append(cmd.Env, standInEnv+"_"+ns+"="+id) // the inner test refuses to run in these
	}
	out, err := cmd.CombinedOutput()
	t.Logf("in the stand-in's namespaces:\n%s", out)
	if err != nil {
		t.Fatalf("the test in the stand-in's namespaces: %v", err)
	}
	if n := strings.Count(string(out), "--- PASS: "+t.Name()+"/"); n != 3 {
		t.Fatalf("%d subtests passed in the stand-in's namespaces, want 3", n)
	}
}

// enterStandIn, inside the namespaces unshare made, puts standInAddr on the
// loopback interface and bind-mounts an /etc/hosts that names it. It
// refuses to run in the outer test's namespaces (the machine's), whose
// network and /etc/hosts it would change.
func enterStandIn(t *testing.T) {
	t.Helper()
	for _, ns := range []string{"net", "mnt"} {
		self, err := os.Readlink("/proc/self/ns/" + ns)
		outer := os.Getenv(standInEnv + "_" + ns)
		if err != nil || outer == "" || self == outer {
			t.Fatalf("%s=1 but the %s namespace is %q, the outer test's %q (%v): refusing to change this machine's network or /etc/hosts",
				standInEnv, ns, self, outer, err)
		}
	}
	for _, args := range [][]string{{"link", "set", "lo", "up"}, {"addr", "add", standInAddr + "/32", "dev", "lo"}} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	hosts := filepath.Join(t.TempDir(), "hosts")
	write(t, hosts, "127.0.0.1 localhost\n::1 localhost\n"+standInAddr+" "+standInName+"\n", 0o644)
	if err := unix.Mount(hosts, "/etc/hosts", "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind-mounting the stand-in's hosts file over /etc/hosts: %v", err)
	}
	t.Cleanup(func() { unix.Unmount("/etc/hosts", 0) })
}
