package bus

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/a2abus/a2abus/schemas"
)

// Work whose deliveries run out is moved to the dead-letter stream (and out
// of the work queue) and reported once per watcher with its task id.
func TestExhaustedWorkIsDeadLettered(t *testing.T) {
	b := newTestBus(t, Config{AckWait: 200 * time.Millisecond, MaxDeliver: 2})
	ctx := testCtx(t)
	got := make(chan DeadLetter, 4)
	stop, err := b.WatchDeadLetters("poison", func(dl DeadLetter) { got <- dl })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	wc, err := b.WorkConsumer(ctx, "poison")
	if err != nil {
		t.Fatal(err)
	}
	id := schemas.NewID()
	if err := b.queueWork(ctx, &schemas.WorkItem{TaskID: id, Agent: "poison", Message: schemas.Message{MessageID: "m", Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart("x")}}}, PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	// Take it twice and never finish: a worker that dies every time.
	for attempt := 1; attempt <= 2; attempt++ {
		var ws []*Work
		deadline := time.Now().Add(10 * time.Second)
		for len(ws) == 0 && time.Now().Before(deadline) {
			ws, err = wc.Fetch(ctx, 1, time.Second)
			if err != nil {
				t.Fatal(err)
			}
		}
		if len(ws) != 1 || ws[0].Attempt != uint64(attempt) {
			t.Fatalf("attempt %d: %d items", attempt, len(ws))
		}
	}
	// The server notices exhausted work when a worker asks for more, as
	// live workers always do.
	var dl DeadLetter
	deadline := time.Now().Add(20 * time.Second)
	for waiting := true; waiting; {
		select {
		case dl = <-got:
			waiting = false
		default:
			if time.Now().After(deadline) {
				t.Fatal("no dead letter")
			}
			if ws, err := wc.Fetch(ctx, 1, 300*time.Millisecond); err != nil || len(ws) != 0 {
				t.Fatalf("exhausted work delivered again: %v %d", err, len(ws))
			}
		}
	}
	if dl.TaskID != id || dl.Agent != "poison" || dl.Deliveries != 2 || dl.Reason == "" {
		t.Fatalf("dead letter %+v", dl)
	}
	st, err := b.js.Stream(ctx, schemas.StreamDLQ)
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetLastMsgForSubject(ctx, schemas.SubjectDLQ("poison"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.Get(schemas.HeaderDLQReason) == "" || m.Header.Get("ce-type") != schemas.TypeWorkExecute {
		t.Fatalf("dead-lettered headers %v", m.Header)
	}
	ws, _ := b.js.Stream(ctx, schemas.StreamWork)
	info, _ := ws.Info(ctx)
	if info.State.Msgs != 0 {
		t.Fatalf("work stream still holds %d messages", info.State.Msgs)
	}
	// Kept for inspection: listed with its task and why.
	dls, err := b.deadLetters(ctx, "poison")
	if err != nil || len(dls) != 1 || dls[0].TaskID != id || dls[0].Reason != m.Header.Get(schemas.HeaderDLQReason) {
		t.Fatalf("deadLetters: %+v %v", dls, err)
	}
	if none, err := b.deadLetters(ctx, "healthy"); err != nil || len(none) != 0 {
		t.Fatalf("deadLetters of an agent with none: %+v %v", none, err)
	}
}

// A malformed item is dead-lettered by the worker that took it.
func TestMalformedWorkDeadLetter(t *testing.T) {
	b := newTestBus(t, Config{})
	ctx := testCtx(t)
	wc, err := b.WorkConsumer(ctx, "junk")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.nc.PublishMsg(&nats.Msg{Subject: schemas.SubjectWork("junk"), Data: []byte("not an event")}); err != nil {
		t.Fatal(err)
	}
	var ws []*Work
	for len(ws) == 0 {
		if ws, err = wc.Fetch(ctx, 1, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if ws[0].Err == nil {
		t.Fatal("junk decoded")
	}
	if err := ws[0].DeadLetter(context.Background(), "malformed"); err != nil {
		t.Fatal(err)
	}
	st, _ := b.js.Stream(ctx, schemas.StreamDLQ)
	m, err := st.GetLastMsgForSubject(ctx, schemas.SubjectDLQ("junk"))
	if err != nil || string(m.Data) != "not an event" || m.Header.Get(schemas.HeaderDLQReason) != "malformed" {
		t.Fatalf("dlq: %v %+v", err, m)
	}
}

// ListDeadLetters lists the newest dead letters of a kind, newest first,
// with their agent, task, reason and time, and nothing of the other kind.
func TestListDeadLetters(t *testing.T) {
	b := newTestBus(t, Config{})
	ctx := testCtx(t)
	if got, err := b.ListDeadLetters(ctx, schemas.DeadLetterWork, 10); err != nil || len(got) != 0 {
		t.Fatalf("an empty stream: %v, %v", got, err)
	}
	var ids []string
	for i, agent := range []string{"a", "b", "a"} {
		id := schemas.NewID()
		ids = append(ids, id)
		ev, err := b.newEvent("work-"+id, schemas.TypeWorkExecute, id, &schemas.WorkItem{TaskID: id, Agent: agent})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.deadLetter(ctx, agent, uint64(100+i), encodeMsg(schemas.SubjectWorkTask(agent, id), &ev), "reason "+id); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			if err := b.DeadLetterPush(ctx, id, "cfg", "ev", "webhook gone", []byte(`{"secret":"body"}`)); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, err := b.ListDeadLetters(ctx, schemas.DeadLetterWork, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].TaskID != ids[2] || got[1].TaskID != ids[1] || got[0].Agent != "a" || got[1].Agent != "b" ||
		got[0].Reason != "reason "+ids[2] || got[0].Kind != schemas.DeadLetterWork || got[0].At.IsZero() {
		t.Fatalf("newest two work dead letters: %+v; want tasks %s, %s", got, ids[2], ids[1])
	}
	push, err := b.ListDeadLetters(ctx, schemas.DeadLetterPush, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(push) != 1 || push[0].TaskID != ids[1] || push[0].ConfigID != "cfg" || push[0].Reason != "webhook gone" || push[0].Kind != schemas.DeadLetterPush {
		t.Fatalf("push dead letters: %+v", push)
	}
}
