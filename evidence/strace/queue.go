package strace

import (
	"slices"
)

// pending is the first half of a call waiting for its resumption.
type pending struct {
	call *Call
	text string // the text after the name's '(' so far
	slot int    // reserved queue slot (clone family only), or -1
}

// entry is one queued event; a clone family call reserves its entry at its
// first half and fills it at its second.
type entry struct {
	call  *Call
	ready bool
}

// pop returns the queue's head if it is ready, applying its effect on the
// domain state.
func (p *Parser) pop() *Call {
	if p.head == len(p.queue) {
		if p.head > 0 {
			p.queue = p.queue[:0]
			p.head = 0
		}
		return nil
	}
	e := p.queue[p.head]
	if !e.ready {
		return nil
	}
	p.queue[p.head] = entry{}
	p.head++
	p.apply(e.call)
	p.stats.Calls++
	return e.call
}

// push queues c, or reserves a slot for a call yet to come (c nil); it
// returns the slot's index.
func (p *Parser) push(c *Call) int {
	p.queue = append(p.queue, entry{call: c, ready: c != nil})
	return len(p.queue) - 1
}

// fill puts c in a reserved slot.
func (p *Parser) fillSlot(slot int, c *Call) {
	p.queue[slot] = entry{call: c, ready: true}
}

// newCall cuts a call from the slab.
func (p *Parser) newCall() *Call {
	if len(p.calls) == 0 {
		p.calls = make([]Call, 256)
	}
	c := &p.calls[0]
	p.calls = p.calls[1:]
	return c
}

// scan splits a call's arguments into an exactly sized slice cut from the
// slab.
func (p *Parser) scan(body string) ([]Arg, int, bool) {
	args, end, ok := scanArgs(body, p.scratch[:0], true)
	p.scratch = args[:0]
	if !ok || len(args) == 0 {
		return nil, end, ok
	}
	if len(p.args) < len(args) {
		p.args = make([]Arg, max(1024, len(args)))
	}
	out := p.args[:len(args):len(args)]
	p.args = p.args[len(args):]
	copy(out, args)
	return out, end, true
}

// finish ends the input: every call still waiting for its second half is
// released as unfinished.
func (p *Parser) finish() {
	p.done = true
	for _, pid := range sortedPIDs(p.pend) {
		p.abandon(pid)
	}
}

func sortedPIDs(m map[int]*pending) []int {
	out := make([]int, 0, len(m))
	for pid := range m {
		out = append(out, pid)
	}
	slices.Sort(out)
	return out
}

// abandon releases pid's pending first half as an unfinished call.
func (p *Parser) abandon(pid int) {
	pe := p.pend[pid]
	if pe == nil {
		return
	}
	delete(p.pend, pid)
	c := pe.call
	c.Unfinished = true
	c.Args, _, _ = p.scan(pe.text)
	p.stats.Unfinished++
	if pe.slot >= 0 {
		p.fillSlot(pe.slot, c)
		return
	}
	p.push(c)
}

// isCloneFamily reports calls that create a thread or process.
func isCloneFamily(name string) bool {
	switch name {
	case "clone", "clone3", "fork", "vfork":
		return true
	}
	return false
}
