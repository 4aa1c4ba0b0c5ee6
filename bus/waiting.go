package bus

import (
	"context"
	"sync"

	"github.com/a2abus/a2abus/schemas"
)

// waitingRecords holds, per process, the stored bytes of tasks this
// process last saw settle waiting for their caller (INPUT_REQUIRED or
// AUTH_REQUIRED), as a TaskWait received them from the task bucket's
// follower: the record a blocking send answered with. The caller's next
// message (Continue) starts its compare-and-swap from those bytes instead
// of reading the task again, which saves a read of a record that grows
// with the conversation (up to the history bound). Nothing here is
// trusted to be current: the compare-and-swap on the revision decides,
// and a record changed since is read again as if none were held (see
// updateStored). Ownership is checked on the held record, whose owner,
// tenant and agent never change over a task's life.
//
// Each entry is taken once; the bound counts entries and bytes, and the
// oldest go first.
type waitingRecords struct {
	mu      sync.Mutex
	m       map[string]watched
	order   []string // insertion order; ids taken or replaced are skipped on eviction
	bytes   int
	maxN    int
	maxSize int
}

// Bounds of waitingRecords: enough for every conversation a busy edge
// has in flight between turns, a small share of its memory.
const (
	waitingMaxRecords = 4096
	waitingMaxBytes   = 16 << 20
)

func newWaitingRecords() *waitingRecords {
	return &waitingRecords{m: map[string]watched{}, maxN: waitingMaxRecords, maxSize: waitingMaxBytes}
}

// put holds w as task id's latest record, replacing what was held.
func (c *waitingRecords) put(id string, w watched) {
	if c == nil || len(w.val) > c.maxSize/16 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[id]; ok {
		c.bytes -= len(old.val)
	} else {
		c.order = append(c.order, id)
	}
	c.m[id] = w
	c.bytes += len(w.val)
	for len(c.m) > c.maxN || c.bytes > c.maxSize {
		oldest := c.order[0]
		c.order = c.order[1:]
		if old, ok := c.m[oldest]; ok {
			c.bytes -= len(old.val)
			delete(c.m, oldest)
		}
	}
	if len(c.order) > 2*c.maxN {
		// Ids taken since leave holes in order: compact it.
		kept := c.order[:0]
		for _, k := range c.order {
			if _, ok := c.m[k]; ok {
				kept = append(kept, k)
			}
		}
		c.order = kept
	}
}

// take removes and returns what is held for task id.
func (c *waitingRecords) take(id string) (watched, bool) {
	if c == nil {
		return watched{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	w, ok := c.m[id]
	if ok {
		delete(c.m, id)
		c.bytes -= len(w.val)
	}
	return w, ok
}

// answerable is the task o answers (Continue) and its revision: the
// record held since it settled waiting, when it is o's, else read as Task
// reads it.
func (b *Bus) answerable(ctx context.Context, o Owner, id string) (*schemas.TaskRecord, uint64, error) {
	if w, ok := b.waiting.take(id); ok {
		if rec, err := decodeRecord(w.val); err == nil && o.Owns(rec) {
			return rec, w.rev, nil
		}
	}
	return b.Task(ctx, o, id)
}
