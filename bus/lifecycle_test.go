package bus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/a2abus/a2abus/schemas"
)

// A task is its creator's: another principal, or the same principal in
// another tenant, gets exactly what a missing task gets, from every
// lifecycle operation and from listing; an admin of the tenant sees every
// principal's tasks there, and nothing crosses tenants.
func TestLifecycleIsolatesOwners(t *testing.T) {
	ctx := context.Background()
	b := newTestBus(t, Config{})
	if err := b.ensureAgent(ctx, "echo"); err != nil {
		t.Fatal(err)
	}
	submit := func(owner, tenant string) *schemas.TaskRecord {
		t.Helper()
		msg := &schemas.Message{MessageID: schemas.NewID(), Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart("hi")}}
		rec, _, err := b.Submit(ctx, Submission{Agent: "echo", Owner: owner, Tenant: tenant, Message: msg}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	alice, bob := submit("alice", "t1"), submit("bob", "t1")
	aliceT2 := submit("alice", "t2")
	missing := schemas.NewID()

	asAlice := Owner{Agent: "echo", Principal: "alice", Tenant: "t1"}
	asBob := Owner{Agent: "echo", Principal: "bob", Tenant: "t1"}
	admin := Owner{Agent: "echo", Principal: "ops", Tenant: "t1", Admin: true}
	otherAgent := Owner{Agent: "other", Principal: "alice", Tenant: "t1"}

	if _, _, err := b.Task(ctx, asAlice, alice.Task.ID); err != nil {
		t.Fatalf("the owner reads its task: %v", err)
	}
	if _, _, err := b.Task(ctx, admin, bob.Task.ID); err != nil {
		t.Fatalf("an admin reads a task of its tenant: %v", err)
	}
	// What a stranger gets is what a missing id gets.
	_, _, wantErr := b.Task(ctx, asBob, missing)
	for _, c := range []struct {
		what string
		o    Owner
		id   string
	}{
		{"another principal", asBob, alice.Task.ID},
		{"the owner in another tenant", asAlice, aliceT2.Task.ID},
		{"an admin of another tenant", admin, aliceT2.Task.ID},
		{"another agent's endpoint", otherAgent, alice.Task.ID},
	} {
		_, _, err := b.Task(ctx, c.o, c.id)
		if !errors.Is(err, schemas.ErrTaskNotFound) || shape(err, c.id) != shape(wantErr, missing) {
			t.Errorf("%s reading: %v, want as for a missing task (%v)", c.what, err, wantErr)
		}
		if _, err := b.Cancel(ctx, c.o, c.id, nil); !errors.Is(err, schemas.ErrTaskNotFound) {
			t.Errorf("%s canceling: %v", c.what, err)
		}
		if _, err := b.Await(ctx, c.o, c.id); !errors.Is(err, schemas.ErrTaskNotFound) {
			t.Errorf("%s awaiting: %v", c.what, err)
		}
		msg := &schemas.Message{MessageID: schemas.NewID(), TaskID: c.id, Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart("x")}}
		if _, _, err := b.Continue(ctx, c.o, Answer{Message: msg}, nil); !errors.Is(err, schemas.ErrTaskNotFound) {
			t.Errorf("%s continuing: %v", c.what, err)
		}
	}
	x := runIndex(t, b)
	ids := func(o Owner) map[string]bool {
		t.Helper()
		out := map[string]bool{}
		for _, id := range listIDs(t, x, ListQuery{Owner: o}) {
			out[id] = true
		}
		return out
	}
	if got := ids(asAlice); len(got) != 1 || !got[alice.Task.ID] {
		t.Errorf("alice lists %v", got)
	}
	if got := ids(admin); len(got) != 2 || !got[alice.Task.ID] || !got[bob.Task.ID] {
		t.Errorf("the admin of t1 lists %v", got)
	}
	if got := ids(Owner{Agent: "echo", Principal: "alice", Tenant: "t2"}); len(got) != 1 || !got[aliceT2.Task.ID] {
		t.Errorf("alice in t2 lists %v", got)
	}
	// Canceling one's own task works, and the record keeps its owner.
	rec, err := b.Cancel(ctx, asAlice, alice.Task.ID, nil)
	if err != nil || rec.Owner != "alice" || rec.Tenant != "t1" {
		t.Fatalf("cancel: %+v %v", rec, err)
	}
}

// shape is an error's message with the id taken out, to compare the answer
// for a stranger's task with the answer for a missing one.
func shape(err error, id string) string {
	if err == nil {
		return ""
	}
	e := schemas.AsError(err)
	return e.Reason + "|" + replaceAll(e.Message, id, "ID") + "|" + replaceAll(e.Metadata["taskId"], id, "ID")
}

func replaceAll(s, old, repl string) string { return strings.ReplaceAll(s, old, repl) }

// A context id a caller chooses is that caller's: its own later tasks may
// name it, another caller's (or the same principal's in another tenant)
// may not, and an edge serving anonymously claims nothing.
func TestLifecycleContextsBelongToTheirFirstCaller(t *testing.T) {
	ctx := context.Background()
	b := newTestBus(t, Config{})
	if err := b.ensureAgent(ctx, "echo"); err != nil {
		t.Fatal(err)
	}
	submit := func(owner, tenant, contextID string) error {
		msg := &schemas.Message{MessageID: schemas.NewID(), ContextID: contextID, Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart("hi")}}
		_, _, err := b.Submit(ctx, Submission{Agent: "echo", Owner: owner, Tenant: tenant, Message: msg}, nil)
		return err
	}
	if err := submit("alice", "t1", "conversation-1"); err != nil {
		t.Fatal(err)
	}
	if err := submit("alice", "t1", "conversation-1"); err != nil {
		t.Fatalf("the owner's second task in her context: %v", err)
	}
	for _, who := range [][2]string{{"bob", "t1"}, {"alice", "t2"}} {
		if err := submit(who[0], who[1], "conversation-1"); !errors.Is(err, schemas.ErrInvalidParams) {
			t.Errorf("%s in %s naming alice's context: %v", who[0], who[1], err)
		}
	}
	for range 2 {
		if err := submit("", "", "anyone's"); err != nil {
			t.Fatalf("anonymous: %v", err)
		}
	}
}

// A context the server makes for a caller's first task is that caller's
// from the moment the task is created: another caller naming it — in
// this process or through another, before its owner ever names it — is
// refused, and the owner goes on in it. Anonymous callers claim nothing.
func TestLifecycleServerMadeContextsBelongToTheirCreator(t *testing.T) {
	ctx := context.Background()
	srv := startServer(t, "")
	first := connect(t, srv, Config{MemoryStorage: true})
	other := connect(t, srv, Config{MemoryStorage: true})
	if err := first.ensureAgent(ctx, "echo"); err != nil {
		t.Fatal(err)
	}
	submit := func(b *Bus, owner, tenant, contextID string) (*schemas.TaskRecord, error) {
		msg := &schemas.Message{MessageID: schemas.NewID(), ContextID: contextID, Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart("hi")}}
		rec, _, err := b.Submit(ctx, Submission{Agent: "echo", Owner: owner, Tenant: tenant, Message: msg}, nil)
		return rec, err
	}
	for _, through := range []struct {
		name string
		b    *Bus
	}{{"the creating process", first}, {"another process", other}} {
		alice, err := submit(first, "alice", "t1", "")
		if err != nil {
			t.Fatal(err)
		}
		made := alice.Task.ContextID
		for _, who := range [][2]string{{"bob", "t1"}, {"alice", "t2"}} {
			_, err := submit(through.b, who[0], who[1], made)
			if !errors.Is(err, schemas.ErrInvalidParams) || !strings.Contains(schemas.AsError(err).Message, "belongs to another caller") {
				t.Errorf("through %s, %q in %q naming alice's server-made context: %v", through.name, who[0], who[1], err)
			}
		}
		for _, b := range []*Bus{first, other} {
			rec, err := submit(b, "alice", "t1", made)
			if err != nil || rec.Task.ContextID != made {
				t.Fatalf("through %s, alice continuing her context: %+v %v", through.name, rec, err)
			}
		}
	}
	anon, err := submit(first, "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.leaderGet(ctx, kvStream(schemas.BucketContexts), kvPrefix(schemas.BucketContexts)+schemas.ContextKey(anon.Task.ContextID)); !errors.Is(err, errNoMessage) {
		t.Fatalf("an anonymous task's context was claimed: %v", err)
	}
	for range 2 {
		if _, err := submit(other, "", "", anon.Task.ContextID); err != nil {
			t.Fatalf("anonymous in an anonymous context: %v", err)
		}
	}
}

// A new context's claim that meets a claim already stored (its own
// write, stored though the answer was lost, and retried) is settled by
// reading it: the same caller's is taken as done, another's refused.
func TestClaimNewContextMeetingAStoredClaim(t *testing.T) {
	ctx := context.Background()
	srv := startServer(t, "")
	first := connect(t, srv, Config{MemoryStorage: true})
	other := connect(t, srv, Config{MemoryStorage: true}) // remembers no claim
	id := schemas.NewID()
	if err := first.claimNewContext(id, "alice", "t1")(ctx); err != nil {
		t.Fatal(err)
	}
	if err := other.claimNewContext(id, "alice", "t1")(ctx); err != nil {
		t.Fatalf("the same claim again: %v", err)
	}
	if err := other.claimNewContext(id, "bob", "t1")(ctx); !errors.Is(err, schemas.ErrInvalidParams) {
		t.Fatalf("another caller's claim over it: %v", err)
	}
	if claimed := first.claimNewContext(id, "", ""); claimed != nil {
		t.Fatal("an anonymous caller claims a context")
	}
}

// A claim decides the same in every process (one that created it, one
// that only reads it), and a context still in use past half its TTL has
// its claim rewritten, so the owner keeps it for another TTL.
func TestLifecycleContextClaimsAcrossProcessesAndRenewal(t *testing.T) {
	ctx := context.Background()
	const ttl = 2 * time.Second
	srv := startServer(t, "")
	open := func() *Bus { return connect(t, srv, Config{MemoryStorage: true, TaskTTL: ttl}) }
	first := open()
	if err := first.ensureAgent(ctx, "echo"); err != nil {
		t.Fatal(err)
	}
	submit := func(b *Bus, owner string) error {
		msg := &schemas.Message{MessageID: schemas.NewID(), ContextID: "long-conversation", Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart("hi")}}
		_, _, err := b.Submit(ctx, Submission{Agent: "echo", Owner: owner, Tenant: "t1", Message: msg}, nil)
		return err
	}
	if err := submit(first, "alice"); err != nil {
		t.Fatal(err)
	}
	claimTime := func() time.Time {
		m, err := first.leaderGet(ctx, kvStream(schemas.BucketContexts), kvPrefix(schemas.BucketContexts)+schemas.ContextKey("long-conversation"))
		if err != nil {
			t.Fatal(err)
		}
		return m.Time
	}
	created := claimTime()
	other := open()
	if err := submit(other, "bob"); !errors.Is(err, schemas.ErrInvalidParams) {
		t.Fatalf("bob through another process: %v", err)
	}
	if err := submit(first, "bob"); !errors.Is(err, schemas.ErrInvalidParams) {
		t.Fatalf("bob through the claiming process: %v", err)
	}
	if err := submit(other, "alice"); err != nil {
		t.Fatalf("alice through another process: %v", err)
	}
	if got := claimTime(); !got.Equal(created) {
		t.Fatalf("a young claim was rewritten: %v → %v", created, got)
	}
	// Half the claim's life is the rule under test, so time has to pass.
	time.Sleep(ttl/2 + 100*time.Millisecond)
	if err := submit(first, "alice"); err != nil {
		t.Fatalf("alice past half the TTL: %v", err)
	}
	if got := claimTime(); !got.After(created.Add(ttl / 2)) {
		t.Fatalf("the claim was not renewed: stored %v, created %v", got, created)
	}
	if err := submit(open(), "bob"); !errors.Is(err, schemas.ErrInvalidParams) {
		t.Fatalf("bob after the renewal: %v", err)
	}
}

// A task's push-notification configs belong to it: only its owner (or an
// admin of its tenant) creates, reads, lists and deletes them, a stranger
// finds no task, and the task is marked before its first config is stored.
// Configs are checked, bounded per task, replaced by id, listed in the
// order they were created; deleting is idempotent.
func TestPushConfigsBelongToTheirTask(t *testing.T) {
	b := newTestBus(t, Config{})
	ctx := testCtx(t)
	alice := Owner{Agent: "echo", Principal: "alice", Tenant: "t1"}
	bob := Owner{Agent: "echo", Principal: "bob", Tenant: "t1"}
	admin := Owner{Agent: "echo", Principal: "ops", Tenant: "t1", Admin: true}
	rec := mkTask(t, b, "echo", "alice", "c", schemas.TaskStateWorking, time.Now())
	id := rec.Task.ID
	cfg := func(cid, url string) schemas.TaskPushNotificationConfig {
		return schemas.TaskPushNotificationConfig{TaskID: id, ID: cid, URL: url}
	}

	first, err := b.CreatePushConfig(ctx, alice, cfg("", "https://hooks.example/one"), "1.0")
	if err != nil || first.Config.ID == "" || first.Config.TaskID != id || first.Dialect != "1.0" {
		t.Fatalf("created %+v, %v", first, err)
	}
	if got, _, err := b.GetTask(ctx, id); err != nil || !got.Push {
		t.Fatalf("the task is not marked for push (%v)", err)
	}
	if _, err := b.CreatePushConfig(ctx, admin, cfg("two", "https://hooks.example/two"), "0.3"); err != nil {
		t.Fatal(err)
	}
	replaced, err := b.CreatePushConfig(ctx, alice, cfg(first.Config.ID, "https://hooks.example/one-b"), "1.0")
	if err != nil || !replaced.CreatedAt.Equal(first.CreatedAt.Time) {
		t.Fatalf("replacing: %+v, %v", replaced, err)
	}
	list, err := b.PushConfigs(ctx, alice, id)
	if err != nil || len(list) != 2 || list[0].Config.URL != "https://hooks.example/one-b" || list[1].Config.ID != "two" || list[1].Dialect != "0.3" {
		t.Fatalf("listed %+v, %v", list, err)
	}
	if got, err := b.PushConfig(ctx, alice, id, "two"); err != nil || got.Config.URL != "https://hooks.example/two" {
		t.Fatalf("got %+v, %v", got, err)
	}
	if _, err := b.PushConfig(ctx, alice, id, "nope"); !errors.Is(err, schemas.ErrTaskNotFound) {
		t.Fatalf("an unknown config: %v", err)
	}

	// A stranger, or a task that is not there: not found, for every call.
	missing := schemas.NewID()
	for _, c := range []struct {
		o  Owner
		id string
	}{{bob, id}, {alice, missing}} {
		if _, err := b.CreatePushConfig(ctx, c.o, schemas.TaskPushNotificationConfig{TaskID: c.id, URL: "https://hooks.example/x"}, "1.0"); !errors.Is(err, schemas.ErrTaskNotFound) {
			t.Errorf("create: %v", err)
		}
		if _, err := b.PushConfig(ctx, c.o, c.id, "two"); !errors.Is(err, schemas.ErrTaskNotFound) {
			t.Errorf("get: %v", err)
		}
		if _, err := b.PushConfigs(ctx, c.o, c.id); !errors.Is(err, schemas.ErrTaskNotFound) {
			t.Errorf("list: %v", err)
		}
		if err := b.DeletePushConfig(ctx, c.o, c.id, "two"); !errors.Is(err, schemas.ErrTaskNotFound) {
			t.Errorf("delete: %v", err)
		}
	}

	// Configs that would be sent as they are refused.
	for name, c := range map[string]schemas.TaskPushNotificationConfig{
		"no url":           cfg("", ""),
		"not http":         cfg("", "ftp://hooks.example/x"),
		"relative":         cfg("", "/hooks"),
		"credentials":      cfg("", "https://u:p@hooks.example/x"),
		"token line break": {TaskID: id, URL: "https://hooks.example/x", Token: "t\r\nX-Evil: 1"},
		"no scheme":        {TaskID: id, URL: "https://hooks.example/x", Authentication: &schemas.AuthenticationInfo{Credentials: "c"}},
		"bad scheme":       {TaskID: id, URL: "https://hooks.example/x", Authentication: &schemas.AuthenticationInfo{Scheme: "Bea rer"}},
		"credential break": {TaskID: id, URL: "https://hooks.example/x", Authentication: &schemas.AuthenticationInfo{Scheme: "Bearer", Credentials: "a\nb"}},
		"huge url":         cfg("", "https://hooks.example/"+strings.Repeat("x", maxPushURL)),
	} {
		if _, err := b.CreatePushConfig(ctx, alice, c, "1.0"); !errors.Is(err, schemas.ErrInvalidParams) {
			t.Errorf("%s: %v, want invalid params", name, err)
		} else if strings.Contains(err.Error(), "u:p@") {
			t.Errorf("%s: the refusal repeats the URL's credentials: %v", name, err)
		}
	}

	// At most MaxPushConfigsPerTask; one of them can still be replaced.
	for i := len(list); i < MaxPushConfigsPerTask; i++ {
		if _, err := b.CreatePushConfig(ctx, alice, cfg(fmt.Sprint("n", i), "https://hooks.example/n"), "1.0"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.CreatePushConfig(ctx, alice, cfg("over", "https://hooks.example/n"), "1.0"); !errors.Is(err, schemas.ErrInvalidParams) {
		t.Fatalf("one config past the bound: %v", err)
	}
	if _, err := b.CreatePushConfig(ctx, alice, cfg("two", "https://hooks.example/two-b"), "1.0"); err != nil {
		t.Fatalf("replacing at the bound: %v", err)
	}

	// Deleting is idempotent; the last one leaves nothing behind.
	list, _ = b.PushConfigs(ctx, alice, id)
	for _, c := range list {
		for range 2 {
			if err := b.DeletePushConfig(ctx, alice, id, c.Config.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	if list, err := b.PushConfigs(ctx, alice, id); err != nil || len(list) != 0 {
		t.Fatalf("after deleting all: %d configs, %v", len(list), err)
	}
	if _, rev, err := b.readPushConfigs(ctx, id); err != nil || rev != 0 {
		t.Fatalf("an emptied set is still stored (revision %d, %v)", rev, err)
	}
}
