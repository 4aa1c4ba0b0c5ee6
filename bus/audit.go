package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/a2abus/a2abus/schemas"
)

// The audit record: an append-only stream (schemas.StreamAudit, its row
// in contract.go) of schemas.AuditRecord, one JSON message each on
// SubjectAudit(kind). Every role may append; no role but admin may delete
// a message, purge or delete the stream, or change its bounds
// (Role.permissions), and the stream itself refuses message deletes and
// purges (DenyDelete, DenyPurge), which no update can take back. Operators
// read it with the nats CLI as any stream (README), or through an edge's
// GET /a2a/admin/audit (AuditRecords).

// auditAppendLimit bounds one append: an audited call waits for it.
const auditAppendLimit = 5 * time.Second

// auditScan bounds how many of the stream's newest records one read
// (AuditRecords) looks at.
const auditScan = 65536

// ErrAuditNotStored is returned by AppendAudit when the record was not
// stored (the stream is missing, full of unanswered writes, unreachable, or
// this user may not append). It matches schemas.ErrUnavailable too.
var ErrAuditNotStored = errors.New("bus: the audit record was not stored")

// AppendAudit stores r in the audit stream and returns once the stream
// acknowledged it, within auditAppendLimit: an error means it is not
// stored (ErrAuditNotStored and schemas.ErrUnavailable; ErrNotPermitted as
// well when this connection's user may not append). The bus sets r.Writer
// and, when zero, r.Time; r.Kind must be schemas.AuditCall or AuditAdmin.
func (b *Bus) AppendAudit(ctx context.Context, r schemas.AuditRecord) error {
	if r.Kind != schemas.AuditCall && r.Kind != schemas.AuditAdmin {
		return fmt.Errorf("bus: an audit record of kind %q: want %q or %q", r.Kind, schemas.AuditCall, schemas.AuditAdmin)
	}
	if r.Time.IsZero() {
		r.Time = time.Now().UTC()
	}
	r.Writer, r.Seq = b.source, 0
	data, err := json.Marshal(&r)
	if err != nil {
		return fmt.Errorf("bus: encode audit record: %w", err)
	}
	subject := schemas.SubjectAudit(r.Kind)
	ctx, cancel := context.WithTimeout(ctx, auditAppendLimit)
	defer cancel()
	wctx, stop := b.refusals.watch(ctx, subject)
	defer stop()
	if _, err = b.js.Publish(wctx, subject, data); err != nil {
		if refused := refusedCause(wctx); refused != nil {
			err = refused
		}
		return fmt.Errorf("%w: %w", ErrAuditNotStored, errUnavailable("bus: append audit record", err))
	}
	return nil
}

// AuditRecords returns the audit records q selects among the stream's
// newest auditScan, oldest first (newest last): at most q.Limit of them
// (1 to 10000; the newest that match), each with its stream sequence. A
// record that does not decode is skipped. Errors match
// schemas.ErrUnavailable.
func (b *Bus) AuditRecords(ctx context.Context, q schemas.AuditQuery) ([]schemas.AuditRecord, error) {
	out := []schemas.AuditRecord{}
	if q.Limit < 1 {
		return out, nil
	}
	q.Limit = min(q.Limit, 10000)
	st, err := b.js.Stream(ctx, schemas.StreamAudit)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return out, nil // nothing audited yet
	}
	if err != nil {
		return nil, errUnavailable("bus: read the audit record", err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, errUnavailable("bus: read the audit record", err)
	}
	last := info.State.LastSeq
	if info.State.Msgs == 0 {
		return out, nil
	}
	start := info.State.FirstSeq
	if last >= auditScan && last-auditScan+1 > start {
		start = last - auditScan + 1
	}
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: start}
	cons, err := b.js.OrderedConsumer(ctx, schemas.StreamAudit, cfg)
	if err != nil {
		return nil, errUnavailable("bus: read the audit record", err)
	}
	defer func() {
		if ci := cons.CachedInfo(); ci != nil {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_ = b.js.DeleteConsumer(dctx, schemas.StreamAudit, ci.Name)
			cancel()
		}
	}()
	ring := make([]schemas.AuditRecord, 0, min(q.Limit, 256))
	next := 0 // where the next one goes once ring is full
	for done := false; !done; {
		batch, err := cons.Fetch(512, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return nil, errUnavailable("bus: read the audit record", err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			meta, merr := m.Metadata()
			if merr != nil || meta.NumPending == 0 || meta.Sequence.Stream >= last {
				done = true
			}
			var r schemas.AuditRecord
			if readJSON(m.Data(), &r) != nil || !q.Match(&r) {
				continue
			}
			if meta != nil {
				r.Seq = meta.Sequence.Stream
			}
			if len(ring) < q.Limit {
				ring = append(ring, r)
			} else {
				ring[next] = r
				next = (next + 1) % q.Limit
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return nil, errUnavailable("bus: read the audit record", err)
		}
		if got == 0 {
			done = true // the newest aged out meanwhile
		}
	}
	for i := range ring {
		out = append(out, ring[(next+i)%len(ring)])
	}
	return out, nil
}
