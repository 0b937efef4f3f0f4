package prune

import (
	"context"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
)

// ContainOptions configures the containment checks.
type ContainOptions struct{}

func (s *state) limits(ctx context.Context, p *policy.Policy) (*policy.Policy, error) {
	s.entry("limits", map[string]any{"skipped": "not implemented yet"})
	return p, nil
}

func (s *state) contain(ctx context.Context, p *policy.Policy) error {
	s.entry("containment", map[string]any{"checks": []any{}, "skipped": "not implemented yet"})
	return nil
}
