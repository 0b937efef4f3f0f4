package strace

import (
	"strings"

	"github.com/lockstep-sandbox/lockstep/landlock"
)

// thread is the domain state of one thread.
type thread struct {
	depth int
	tgid  int
}

// apply sets a released call's domain fields and applies its effect.
func (p *Parser) apply(c *Call) {
	th := p.threads[c.PID]
	if th == nil {
		th = &thread{tgid: c.PID}
		switch {
		case c.PID == p.root:
		case p.lost != nil:
			th.depth = p.lost.depth
			if p.lost.tgid != 0 {
				th.tgid = p.lost.tgid
			}
			p.lost = nil
			p.stats.Inferred++
		default:
			p.stats.Unplaced++
		}
		p.threads[c.PID] = th
	}
	c.TGID, c.Depth, c.InDomain = th.tgid, th.depth, th.depth > 0
	switch c.Kind {
	case Exit, Killed:
		delete(p.threads, c.PID)
		return
	case Superseded:
		if old := p.threads[c.Status]; old != nil && c.Status != c.PID {
			th.depth = old.depth
			delete(p.threads, c.Status)
		}
		th.tgid = c.PID
		return
	case Signal:
		return
	}
	if c.Failed() || c.Unfinished {
		return
	}
	switch {
	case c.Name == "landlock_restrict_self":
		if c.Ret != "0" || len(c.Args) < 2 {
			return
		}
		if fd, ok := c.Args[0].FD(); ok && fd.Num == -1 {
			return // logging configuration only, no new domain
		}
		// strace 6.1 prints TSYNC as a number.
		if c.Args[1].HasFlag("LANDLOCK_RESTRICT_SELF_TSYNC") || c.Args[1].FlagBits()&uint64(landlock.RestrictTSync) != 0 {
			for _, o := range p.threads {
				if o.tgid == th.tgid && o != th {
					o.depth++
				}
			}
		}
		th.depth++
	case isCloneFamily(c.Name):
		sameGroup := false
		for _, a := range c.Args {
			if strings.Contains(string(a), "CLONE_THREAD") {
				sameGroup = true
			}
		}
		child, ok := c.Result()
		if c.Ret == "?" {
			p.lost = &thread{depth: th.depth}
			if sameGroup {
				p.lost.tgid = th.tgid
			}
			return
		}
		if !ok || child <= 0 || child > 1<<31-1 {
			return
		}
		nt := &thread{depth: th.depth, tgid: int(child)}
		if sameGroup {
			nt.tgid = th.tgid
		}
		if _, seen := p.threads[int(child)]; seen || int(child) == p.root {
			p.stats.Reused++
		}
		p.threads[int(child)] = nt
	}
}
