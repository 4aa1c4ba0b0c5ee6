package bus

import (
	"sync"

	"github.com/a2abus/a2abus/schemas"
)

// The record hand-over: within one process (serve, or an edge that also
// runs workers) the part that writes a task record hands the record it
// wrote, decoded, to the part that reads it next, instead of that part
// reading the store and decoding the bytes again — the cost that grows
// with a conversation up to the history bound.
//
//   - A client's answer (Continue) whose record is too large for its work
//     item to carry (workSnapshotMax) is handed to this process's worker
//     of the agent, if it has one: Work.Snapshot takes it in place of the
//     worker's read of the store.
//   - A write that leaves a task waiting for its caller (INPUT_REQUIRED,
//     AUTH_REQUIRED) is held for the caller's next message (waitingRecords)
//     when a blocking send of this process waits on the task, as that
//     wait would hold it after decoding the stored bytes itself.
//
// Each side gets its own copy (schemas.TaskRecord.Clone), so the writer
// keeps using the record it wrote. Nothing handed is trusted to be
// current: it is taken only at the revision the reader needs (the work
// item's, the one the follower delivered), the revision a write returned
// names exactly the bytes stored by it, and every later write is a
// compare-and-swap on the revision, as with any record held. What no one
// takes is dropped, oldest first, within waitingRecords' bounds.
type handover struct {
	// work holds the records handed to this process's workers.
	work *waitingRecords
	mu   sync.Mutex
	// agents are those whose work this process takes (WorkConsumer).
	agents map[string]bool
	// watchers are this process's task watchers (NewTaskWatcher).
	watchers []*TaskWatcher
}

func newHandover() *handover {
	return &handover{work: newWaitingRecords(), agents: map[string]bool{}}
}

func (h *handover) takesWorkOf(agent string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.agents[agent]
}

func (h *handover) addAgent(agent string) {
	h.mu.Lock()
	h.agents[agent] = true
	h.mu.Unlock()
}

func (h *handover) addWatcher(t *TaskWatcher) {
	h.mu.Lock()
	h.watchers = append(h.watchers, t)
	h.mu.Unlock()
}

// waitedOn reports whether a wait of this process follows the task.
func (h *handover) waitedOn(taskID string) bool {
	h.mu.Lock()
	ws := h.watchers
	h.mu.Unlock()
	for _, t := range ws {
		if t.hasWaiters(taskID) {
			return true
		}
	}
	return false
}

// handWork hands rec, as a Continue stored it at rev (stored: its bytes),
// to this process's worker of its agent, when the work item cannot carry
// it.
func (b *Bus) handWork(rec *schemas.TaskRecord, rev uint64, stored []byte) {
	if len(stored) <= workSnapshotMax || !b.handover.takesWorkOf(rec.Agent) {
		return
	}
	b.handover.work.put(rec.Task.ID, heldDecoded(rec.Clone(), watched{val: stored, rev: rev}))
}

// holdSettled holds rec, about to be written as val, for its caller's
// next message when the write leaves it waiting for the caller and a wait
// of this process follows it. It is held before the write, so the wait,
// which may see the write stored before its writer hears back, finds it:
// it is the record as stored once a write stores val (waitingRecords'
// claim and confirm), and answers nothing while it has no revision. It
// reports whether it held rec.
func (b *Bus) holdSettled(rec *schemas.TaskRecord, val []byte) bool {
	if !rec.Task.Status.State.Interrupted() || !b.handover.waitedOn(rec.Task.ID) {
		return false
	}
	b.waiting.put(rec.Task.ID, heldWriting(rec.Clone(), val))
	return true
}

// Snapshot is the task record a worker may start this work from instead
// of reading the store: the one the item carries (decoded), else the
// record its process handed over at the revision the item submits (only
// a record too large for the item is handed over, so an item that carries
// one takes no look at the hand-over), or nil. The caller checks it is the item's task, still SUBMITTED; a
// snapshot is only for a first delivery (see schemas.WorkItem.Record).
// The record is the caller's to change.
func (w *Work) Snapshot() *schemas.TaskRecord {
	switch {
	case w.Item.TaskRevision == 0:
		return nil
	case len(w.Item.Record) > 0:
		rec, err := DecodeRecord(w.Item.Record)
		if err != nil {
			return nil
		}
		return rec
	case w.b == nil:
		return nil
	}
	if h, ok := w.b.handover.work.take(w.Item.TaskID); ok && h.rec != nil && h.rev == w.Item.TaskRevision {
		return h.rec
	}
	return nil
}
