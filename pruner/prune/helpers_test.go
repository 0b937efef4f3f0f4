package prune

import (
	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/pruner/search"
)

func searchItems(p *policy.Policy) []search.Item { return search.Items(p) }

func dropItem(p *policy.Policy, i int) *policy.Policy {
	items := search.Items(p)
	rest := append(append([]search.Item(nil), items[:i]...), items[i+1:]...)
	return search.Build(rest, p)
}
