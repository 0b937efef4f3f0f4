package policy

import (
	"sort"
)

// Narrowed returns the cross-check run's policy: p's filesystem entries sorted
// by path with every second one removed (index 1, 3, 5, … go; 0, 2, 4, …
// stay, as Phobos's narrowed does), comments alike, network rules untouched
// and no limits at all (every limit off, so only Landlock can refuse).
// removed is the number of filesystem entries taken out.
//
// Unlike Phobos's, an entry that grants one of needed (the files starting
// the exercise's interpreter needs, as observer.StartNeeds finds them) is never removed: without it
// the run stops before the command starts and nothing can be compared. When
// that leaves nothing removed, the first entry no needed file depends on goes
// instead, so the cross-check still provokes refusals.
func Narrowed(p *Policy, needed ...string) (n *Policy, removed int) {
	paths := make([]string, 0, len(p.FS))
	for path := range p.FS {
		paths = append(paths, path)
	}
	sort.Strings(paths)
	critical := func(path string) bool {
		for _, f := range needed {
			if f == path || Beneath(f, path) {
				return true
			}
		}
		return false
	}
	drop := make(map[string]bool, len(paths))
	spared := 0
	for i, path := range paths {
		if i%2 == 1 {
			if critical(path) {
				spared++
				continue
			}
			drop[path] = true
		}
	}
	if len(drop) == 0 && spared > 0 {
		for _, path := range paths {
			if !critical(path) {
				drop[path] = true
				break
			}
		}
	}
	n = &Policy{
		FS:       make(map[string]map[Section]bool, len(paths)),
		Connect:  append([]ConnectRule(nil), p.Connect...),
		Bind:     append([]BindRule(nil), p.Bind...),
		Limits:   map[LimitKey]Limit{},
		Comments: map[string]string{},
		Header:   []string{"the observer's cross-check policy: every second filesystem entry removed, no limits"},
	}
	for _, path := range paths {
		if drop[path] {
			removed++
			continue
		}
		secs := make(map[Section]bool, len(p.FS[path]))
		for s, on := range p.FS[path] {
			secs[s] = on
		}
		n.FS[path] = secs
		if c, ok := p.Comments[path]; ok {
			n.Comments[path] = c
		}
	}
	return n, removed
}

// WithBind returns a copy of p with the UDP bind rows added (rules of the
// form "allow <port> udp"); rows p already holds are not repeated.
func WithBind(p *Policy, ports []int) *Policy {
	q := *p
	q.Bind = append([]BindRule(nil), p.Bind...)
	for _, port := range ports {
		held := false
		for _, b := range q.Bind {
			if b.Port == port && b.Transport == UDP {
				held = true
				break
			}
		}
		if !held {
			q.Bind = append(q.Bind, BindRule{Port: port, Transport: UDP})
		}
	}
	return &q
}
