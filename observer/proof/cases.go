package proof

import (
	"strings"

	"github.com/lockstep-sandbox/lockstep/landlock"
)

// Refusal is one right class the proof refuses on purpose.
type Refusal struct {
	// Right is the only blocker the record may name.
	Right landlock.Right
	// Name is the check's name: the right without its "fs."/"net." prefix,
	// or the whole name of a scope.
	Name string
}

// Refusals lists the right classes the proof refuses, one child each, in
// table order.
var Refusals = refusals(
	landlock.ReadFile, landlock.ReadDir, landlock.WriteFile, landlock.Truncate, landlock.Execute,
	landlock.MakeReg, landlock.MakeDir, landlock.RemoveFile, landlock.MakeSym, landlock.Refer, landlock.IoctlDev,
	landlock.BindTCP, landlock.ConnectTCP, landlock.BindUDP, landlock.ConnectSendUDP,
	landlock.Signal,
)

func refusals(rights ...landlock.Right) []Refusal {
	out := make([]Refusal, len(rights))
	for i, r := range rights {
		name := string(r)
		if c := r.Class(); c == landlock.ClassFS || c == landlock.ClassNet {
			name = strings.TrimPrefix(name, c.String()+".")
		}
		out[i] = Refusal{Right: r, Name: name}
	}
	return out
}

// Blocker is the record's blocker the refusal must name.
func (r Refusal) Blocker() string { return string(r.Right) }

// ABI returns the Landlock ABI version that introduced the refusal's right.
func (r Refusal) ABI() int { return r.Right.ABI() }

// LookupRefusal returns the refusal named name.
func LookupRefusal(name string) (Refusal, bool) {
	for _, r := range Refusals {
		if r.Name == name {
			return r, true
		}
	}
	return Refusal{}, false
}
