package bus

import (
	"bytes"
	"context"
	"sync"

	"github.com/a2abus/a2abus/schemas"
)

// waitingRecords holds, per process, the records of tasks this process
// last saw settle waiting for their caller (INPUT_REQUIRED or
// AUTH_REQUIRED), as a TaskWait received them from the task bucket's
// follower: the record a blocking send answered with. The caller's next
// message (Continue) starts its compare-and-swap from that record instead
// of reading the task again, which saves a read of a record that grows
// with the conversation (up to the history bound). A wait that answered
// with the stored bytes holds the record decoded (it decoded them then, in
// place of checking them, see UntilStateRaw), so the next message does
// not decode them again; any other wait holds the bytes. Nothing here is
// trusted to be current: the compare-and-swap on the revision decides,
// and a record changed since is read again as if none were held (see
// updateStored). Ownership is checked on the held record, whose owner,
// tenant and agent never change over a task's life.
//
// Each entry is taken once; the bound counts entries and bytes, and the
// oldest go first.
type waitingRecords struct {
	mu      sync.Mutex
	m       map[string]held
	order   []string // insertion order; ids taken or replaced are skipped on eviction
	bytes   int
	maxN    int
	maxSize int
}

// held is one record of waitingRecords: its stored bytes, or the record
// decoded from them, and the revision they were stored at. A record its
// writer held before the write (heldWriting) has its bytes and the record
// they encode, and no revision until the write or a wait that sees those
// bytes stored gives it one (confirm, claim); until then it answers no
// message (take's caller reads instead).
type held struct {
	val  []byte
	rec  *schemas.TaskRecord
	rev  uint64
	size int // what it counts against the bound
}

// decodedSize is what a record held decoded counts against the bound, per
// byte of its stored form: its strings are copies of the stored text, and
// every message and part a struct besides.
const decodedSize = 3

func heldBytes(w watched) held { return held{val: w.val, rev: w.rev, size: len(w.val)} }

func heldDecoded(rec *schemas.TaskRecord, w watched) held {
	return held{rec: rec, rev: w.rev, size: decodedSize * len(w.val)}
}

// heldWriting is rec, which val encodes, held by its writer before val is
// written.
func heldWriting(rec *schemas.TaskRecord, val []byte) held {
	return held{rec: rec, val: val, size: (decodedSize + 1) * len(val)}
}

// Bounds of waitingRecords: enough for every conversation a busy edge
// has in flight between turns, a small share of its memory (the bytes
// count a decoded record at decodedSize times its stored size).
const (
	waitingMaxRecords = 4096
	waitingMaxBytes   = 32 << 20
)

func newWaitingRecords() *waitingRecords {
	return &waitingRecords{m: map[string]held{}, maxN: waitingMaxRecords, maxSize: waitingMaxBytes}
}

// put holds h as task id's latest record, replacing what was held.
func (c *waitingRecords) put(id string, h held) {
	if c == nil || h.size > c.maxSize/16 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[id]; ok {
		c.bytes -= old.size
	} else {
		c.order = append(c.order, id)
	}
	c.m[id] = h
	c.bytes += h.size
	for len(c.m) > c.maxN || c.bytes > c.maxSize {
		oldest := c.order[0]
		c.order = c.order[1:]
		if old, ok := c.m[oldest]; ok {
			c.bytes -= old.size
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

// claimLocked reports whether task id's record as got shows it is held
// decoded: held at got's revision, or held by its writer before the write
// with got's very bytes, which then gets got's revision.
func (c *waitingRecords) claimLocked(id string, got watched) (held, bool) {
	h, ok := c.m[id]
	if !ok || h.rec == nil {
		return held{}, false
	}
	if h.rev == 0 && h.val != nil && bytes.Equal(h.val, got.val) {
		h.rev, h.val = got.rev, nil
		c.m[id] = h
	}
	return h, h.rev == got.rev
}

// claim reports whether task id's record as got is held decoded (see
// claimLocked).
func (c *waitingRecords) claim(id string, got watched) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.claimLocked(id, got)
	return ok
}

// copyClaimed is a copy of task id's record as got when it is held
// decoded (claim), else nil: cheaper than decoding got's bytes, and the
// copy is the caller's to change.
func (c *waitingRecords) copyClaimed(id string, got watched) *schemas.TaskRecord {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if h, ok := c.claimLocked(id, got); ok {
		return h.rec.Clone()
	}
	return nil
}

// confirm gives the record its writer held with val (heldWriting) the
// revision val was written at.
func (c *waitingRecords) confirm(id string, val []byte, rev uint64) {
	if c == nil || len(val) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if h, ok := c.m[id]; ok && h.rev == 0 && len(h.val) == len(val) && &h.val[0] == &val[0] {
		h.rev, h.val = rev, nil
		c.m[id] = h
	}
}

// take removes and returns what is held for task id.
func (c *waitingRecords) take(id string) (held, bool) {
	if c == nil {
		return held{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.m[id]
	if ok {
		delete(c.m, id)
		c.bytes -= h.size
	}
	return h, ok
}

// answerable is the task o answers (Continue) and its revision: the
// record held since it settled waiting, when it is o's, else read as Task
// reads it.
func (b *Bus) answerable(ctx context.Context, o Owner, id string) (*schemas.TaskRecord, uint64, error) {
	if h, ok := b.waiting.take(id); ok && h.rev != 0 {
		rec := h.rec
		if rec == nil {
			rec, _ = decodeRecord(h.val)
		}
		if rec != nil && o.Owns(rec) {
			return rec, h.rev, nil
		}
	}
	return b.Task(ctx, o, id)
}
