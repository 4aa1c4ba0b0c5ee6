package bus

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/a2abus/a2abus/schemas"
)

// Records are appended with an acknowledgement and read back filtered,
// oldest first, the newest that match when there are more than the limit.
func TestAuditAppendAndRead(t *testing.T) {
	s := startServer(t, t.TempDir())
	b := connect(t, s, Config{MemoryStorage: true})
	ctx := testCtx(t)
	base := time.Now().UTC().Add(-time.Hour)
	for i, who := range []string{"ann", "bob", "ann", "ann"} {
		r := schemas.AuditRecord{Time: base.Add(time.Duration(i) * time.Minute), Kind: schemas.AuditCall, Principal: who,
			Method: "GetTask", Agent: "echo", TaskID: "t" + string(rune('0'+i)), Decision: schemas.AuditAdmitted, Outcome: schemas.AuditOK}
		if err := b.AppendAudit(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	got, err := b.AuditRecords(ctx, schemas.AuditQuery{Principal: "ann", Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].TaskID != "t2" || got[1].TaskID != "t3" || got[0].Seq == 0 || got[0].Writer == "" {
		t.Fatalf("ann's newest two: %+v, want t2 then t3 with their sequences and writer", got)
	}
	got, err = b.AuditRecords(ctx, schemas.AuditQuery{TaskID: "t1", Limit: 10})
	if err != nil || len(got) != 1 || got[0].Principal != "bob" {
		t.Fatalf("task t1: %+v %v, want bob's one record", got, err)
	}
	got, err = b.AuditRecords(ctx, schemas.AuditQuery{Since: base.Add(90 * time.Second), Until: base.Add(150 * time.Second), Limit: 10})
	if err != nil || len(got) != 1 || got[0].TaskID != "t2" {
		t.Fatalf("between 1m30s and 2m30s: %+v %v, want t2", got, err)
	}
	if err := b.AppendAudit(ctx, schemas.AuditRecord{Kind: "other"}); err == nil {
		t.Error("a record of an unknown kind was appended")
	}
}

// Every a2abus role may append to the audit record and none may take
// anything away: deleting the stream, purging it, deleting a message or
// changing its bounds is refused by the server, and the records stay.
// An edge's provisioning leaves the bounds an admin gave the stream, and
// creates the stream when it is missing.
func TestAuditRecordIsAppendOnlyForEveryRole(t *testing.T) {
	s := startAuthServer(t)
	url := s.ClientURL()
	admin := connect(t, s, Config{MemoryStorage: true, AuditMaxAge: 48 * time.Hour})
	ctx := testCtx(t)
	if err := admin.AppendAudit(ctx, schemas.AuditRecord{Kind: schemas.AuditAdmin, Method: "test", Decision: schemas.AuditAdmitted}); err != nil {
		t.Fatal(err)
	}
	st, err := admin.js.Stream(ctx, schemas.StreamAudit)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	if !cfg.DenyDelete || !cfg.DenyPurge || cfg.MaxAge != 48*time.Hour {
		t.Fatalf("audit stream config %+v: want DenyDelete, DenyPurge and the admin's MaxAge", cfg)
	}
	shrunk := cfg
	shrunk.MaxAge, shrunk.MaxBytes = 10*time.Minute, 1024
	attempts := map[string]func(ctx context.Context, js jetstream.JetStream) error{
		"delete the audit stream": func(ctx context.Context, js jetstream.JetStream) error {
			return js.DeleteStream(ctx, schemas.StreamAudit)
		},
		"purge the audit stream": func(ctx context.Context, js jetstream.JetStream) error {
			st, err := js.Stream(ctx, schemas.StreamAudit)
			if err != nil {
				return err
			}
			return st.Purge(ctx)
		},
		"delete an audit record": func(ctx context.Context, js jetstream.JetStream) error {
			st, err := js.Stream(ctx, schemas.StreamAudit)
			if err != nil {
				return err
			}
			return st.DeleteMsg(ctx, 1)
		},
		"shrink the audit stream's bounds": func(ctx context.Context, js jetstream.JetStream) error {
			_, err := js.UpdateStream(ctx, shrunk)
			return err
		},
	}
	for _, creds := range []Credentials{edgeCreds, edgeAdminCreds, workerCreds} {
		for what, op := range attempts {
			denied(t, url, creds, what, op)
		}
		cfg := Config{AuditMaxAge: time.Hour}
		if creds == workerCreds {
			cfg.BindOnly = true
		}
		b, v := connectAs(t, url, creds, cfg)
		if err := b.AppendAudit(ctx, schemas.AuditRecord{Kind: schemas.AuditCall, Principal: creds.User, Method: "SendMessage", Decision: schemas.AuditAdmitted}); err != nil {
			t.Errorf("%s appends: %v", creds.User, err)
		}
		v.check(t, creds.User)
	}
	st, err = admin.js.Stream(ctx, schemas.StreamAudit)
	if err != nil {
		t.Fatal(err)
	}
	if info := st.CachedInfo(); info.State.Msgs != 4 || info.Config.MaxAge != 48*time.Hour {
		t.Errorf("after the attempts: %d records, MaxAge %v; want the 4 appended and the admin's 48h", info.State.Msgs, info.Config.MaxAge)
	}
	// Not even an admin deletes a record (DenyDelete); it may delete the
	// stream, which an edge then provisions again.
	if err := st.DeleteMsg(ctx, 1); err == nil {
		t.Error("an admin deleted an audit record")
	}
	if err := admin.js.DeleteStream(ctx, schemas.StreamAudit); err != nil {
		t.Fatal(err)
	}
	connectAs(t, url, edgeCreds, Config{AuditMaxAge: time.Hour})
	if st, err := admin.js.Stream(ctx, schemas.StreamAudit); err != nil || st.CachedInfo().Config.MaxAge != time.Hour {
		t.Errorf("the audit stream an edge provisioned: %v", err)
	}
}

// An append the stream cannot take fails at once with ErrAuditNotStored,
// classified as unavailable.
func TestAuditAppendFailsWithoutTheStream(t *testing.T) {
	s := startServer(t, t.TempDir())
	b := connect(t, s, Config{MemoryStorage: true})
	ctx := testCtx(t)
	if err := b.js.DeleteStream(ctx, schemas.StreamAudit); err != nil {
		t.Fatal(err)
	}
	err := b.AppendAudit(ctx, schemas.AuditRecord{Kind: schemas.AuditCall, Method: "GetTask", Decision: schemas.AuditAdmitted})
	if !errors.Is(err, ErrAuditNotStored) || !errors.Is(err, schemas.ErrUnavailable) {
		t.Fatalf("append without the stream: %v, want ErrAuditNotStored and unavailable", err)
	}
	if recs, err := b.AuditRecords(ctx, schemas.AuditQuery{Limit: 10}); err != nil || len(recs) != 0 {
		t.Errorf("reading without the stream: %v %v, want none", recs, err)
	}
}
