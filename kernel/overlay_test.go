package kernel

import (
	"bytes"
	"strings"
	"testing"
	"testing/fstest"
)

func TestFragmentForOlderPinsIsTheFragment(t *testing.T) {
	// An overlay for a newer kernel must leave older pins' cache keys alone.
	for _, v := range []string{"6.12.117", "7.2.13", "7.2.9"} {
		got, err := FragmentFor(v, fragment)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, fragment) {
			t.Errorf("FragmentFor(%s) differs from fragment.config", v)
		}
	}
}

func TestFragmentFor73RenamesSysctl(t *testing.T) {
	got, err := FragmentFor("7.3.4", fragment)
	if err != nil {
		t.Fatal(err)
	}
	req := strings.Join(RequiredOptions(got), "\n")
	if strings.Contains(req, "CONFIG_PROC_SYSCTL=y") || !strings.Contains(req, "CONFIG_SYSCTL=y") {
		t.Errorf("7.3 requirements: want CONFIG_SYSCTL=y instead of CONFIG_PROC_SYSCTL=y, got\n%s", req)
	}
	later, err := FragmentFor("8.0.1", fragment)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(later, got) {
		t.Error("an overlay must apply to every later version too")
	}
}

func TestFragmentForOrderAndErrors(t *testing.T) {
	base := []byte("CONFIG_A=y\nCONFIG_B=y\n")
	fsys := fstest.MapFS{
		"fragment-7.10.config": {Data: []byte("-CONFIG_C=y\nCONFIG_D=y\n")},
		"fragment-7.3.config":  {Data: []byte("# renamed\n-CONFIG_B=y\nCONFIG_C=y\n")},
	}
	got, err := fragmentFor(fsys, "7.10.0", base)
	if err != nil {
		t.Fatal(err)
	}
	if want := "CONFIG_A=y,CONFIG_D=y"; strings.Join(RequiredOptions(got), ",") != want {
		t.Errorf("7.10 requirements %q, want %q (7.3 before 7.10, numerically)", RequiredOptions(got), want)
	}
	got, err = fragmentFor(fsys, "7.9.1", base)
	if err != nil {
		t.Fatal(err)
	}
	if want := "CONFIG_A=y,CONFIG_C=y"; strings.Join(RequiredOptions(got), ",") != want {
		t.Errorf("7.9 requirements %q, want %q", RequiredOptions(got), want)
	}
	bad := fstest.MapFS{"fragment-7.3.config": {Data: []byte("-CONFIG_X=y\n")}}
	if _, err := fragmentFor(bad, "7.3.0", base); err == nil || !strings.Contains(err.Error(), "CONFIG_X=y") {
		t.Errorf("removing a line the fragment lacks: err = %v, want one naming it", err)
	}
	odd := fstest.MapFS{"fragment-next.config": {Data: []byte("CONFIG_X=y\n")}}
	if _, err := fragmentFor(odd, "7.3.0", base); err == nil {
		t.Error("an overlay named fragment-next.config was accepted")
	}
	if _, err := fragmentFor(fsys, "latest", base); err == nil {
		t.Error("version \"latest\" was accepted")
	}
}
