package orchestrate

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// setNested sets rec[outer][inner] in the record name of the path
// directory.
func (e *env) setNested(t *testing.T, name, outer, inner string, val any) {
	t.Helper()
	editRecord(t, filepath.Join(e.path, name), func(m map[string]any) {
		sub, _ := m[outer].(map[string]any)
		if sub == nil {
			sub = map[string]any{}
		}
		sub[inner] = val
		m[outer] = sub
	})
}

// refusedWith runs the merge of e and wants exactly one problem holding want.
func refusedWith(t *testing.T, e *env, want string) {
	t.Helper()
	sum, err := Run(e.opts())
	var r *Refusal
	if !errors.As(err, &r) {
		t.Fatalf("Run merged (%d languages, error %v); want a refusal with %q", len(sum.Languages), err, want)
	}
	if all := strings.Join(r.Problems, "\n"); !strings.Contains(all, want) {
		t.Errorf("problems =\n%s\nwant one with %q", all, want)
	}
}

// TestRecordFieldTypes: a record member of the wrong JSON type was read as
// absent or empty: `"mismatches": {}` (an object) merged as a verified run
// with no mismatches, and a number as provenance.root_digest counted as no
// digest. Now every member must have its record field's type, and the
// refusal names the file, the field and the type wanted.
func TestRecordFieldTypes(t *testing.T) {
	for _, tc := range []struct {
		Name  string
		Setup func(t *testing.T, e *env)
		Want  string
	}{
		{"mismatches an object", func(t *testing.T, e *env) {
			e.setField(t, "java_two.abi10.json", "mismatches", map[string]any{"operation": "open"})
		}, "java_two.abi10.json has field mismatches of the wrong type: an object; want a list (of objects)"},
		{"root digest a number", func(t *testing.T, e *env) {
			e.setNested(t, "java_two.abi10.json", "provenance", "root_digest", 7)
		}, "java_two.abi10.json has field provenance.root_digest of the wrong type: a number; want a string"},
		{"verified a string", func(t *testing.T, e *env) {
			e.setField(t, "java_two.abi10.json", "verified", "true")
		}, "java_two.abi10.json has field verified of the wrong type: a string; want true or false"},
		{"rows an object", func(t *testing.T, e *env) {
			e.setField(t, "java_two.abi10.json", "rows", map[string]any{})
		}, "java_two.abi10.json has field rows of the wrong type: an object; want a list (of objects)"},
		{"layer record stage a list", func(t *testing.T, e *env) {
			e.setField(t, "java_one.json", "stage", []any{"all"})
		}, "java_one.json has field stage of the wrong type: a list; want a string"},
		{"layer record root digest a number", func(t *testing.T, e *env) {
			e.setNested(t, "java_one.json", "provenance", "root_digest", 7)
		}, "java_one.json has field provenance.root_digest of the wrong type: a number; want a string"},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			e := newEnv(t)
			tc.Setup(t, e)
			refusedWith(t, e, tc.Want)
		})
	}
}

// TestOrchestrateKVMDirTwice: one KVM directory given twice, by the same
// string, as ./dir/ or through a link, "agreed" with itself as two observer
// runs. Now it is refused naming both spellings.
func TestOrchestrateKVMDirTwice(t *testing.T) {
	e := newEnv(t)
	splitKVM(t, e, 1)
	dir := e.kvm[0]
	alias := filepath.Join(filepath.Dir(dir), "alias")
	if err := os.Symlink(filepath.Base(dir), alias); err != nil {
		t.Fatal(err)
	}
	for _, second := range []string{dir, dir + "/./", alias} {
		e.kvm = []string{dir, second}
		refusedWith(t, e, "--kvm-dir "+dir+" and --kvm-dir "+second+" are one directory")
	}
}

// TestOrchestrateRefusesMagicLinkRows: a pruned policy with a row through a
// /proc magic link ([read] /proc/self/root is /) went into the shipped
// base. Now the merge is refused naming the exercise and the row.
func TestOrchestrateRefusesMagicLinkRows(t *testing.T) {
	for _, row := range []string{"/proc/self/root", "/proc/self/cwd/src", "/proc/thread-self/fd/3"} {
		e := newEnv(t)
		data, err := os.ReadFile(filepath.Join(e.path, "java_one.cfg"))
		if err != nil {
			t.Fatal(err)
		}
		e.writeCfg(t, "java_one", string(data)+"\n[read]\n"+row+"\n")
		refusedWith(t, e, "java_one.cfg (exercise one) has the row "+row+", which is or passes through the /proc magic link")
	}
}
