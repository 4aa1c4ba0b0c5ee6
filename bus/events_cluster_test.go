package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/a2abus/a2abus/schemas"
)

// readerCluster is three embedded servers that form a JetStream cluster on
// loopback. Each member keeps its ports and data directory, so a stopped
// one can be started again; all are shut down when the test ends
// (Shutdown is idempotent, so a test may stop one earlier).
type readerCluster struct {
	t          *testing.T
	cfgs       [3]ServerConfig
	servers    [3]*Server
	clientURLs [3]string
	urls       string // every member's client URL, for Config.URL
}

// startReaderCluster starts the cluster; it skips the test unless the
// cluster scenarios run (scenario).
func startReaderCluster(t *testing.T) *readerCluster {
	t.Helper()
	scenario(t)
	c := &readerCluster{t: t}
	var routes []string
	for i := range c.cfgs {
		c.clientURLs[i] = fmt.Sprintf("nats://127.0.0.1:%d", freePort(t))
		c.cfgs[i] = ServerConfig{
			Name: fmt.Sprintf("n%d", i), DataDir: t.TempDir(),
			Listen:      strings.TrimPrefix(c.clientURLs[i], "nats://"),
			ClusterName: "a2abus-test", ClusterListen: fmt.Sprintf("127.0.0.1:%d", freePort(t)),
			Anonymous: true, // loopback; auth_test.go has a cluster with credentials
		}
		routes = append(routes, "nats://"+c.cfgs[i].ClusterListen)
	}
	c.urls = strings.Join(c.clientURLs[:], ",")
	for i := range c.cfgs {
		c.cfgs[i].Routes = routes
		if err := c.start(i); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// start starts member i, again if it was stopped.
func (c *readerCluster) start(i int) error {
	s, err := StartServer(c.cfgs[i])
	if err != nil {
		return fmt.Errorf("start member n%d: %w", i, err)
	}
	c.servers[i] = s
	c.t.Cleanup(s.Shutdown)
	return nil
}

// jsErrClusterNotAvailable is the JetStream error code of "JetStream
// system temporarily unavailable": a member that knows it has no leader.
const jsErrClusterNotAvailable = 10008

// A reader asked for while the cluster has no leader to create its
// consumer is opened once a leader is elected, not refused: ReadEvents
// tries again while the bus answers "temporarily unavailable". Two of
// three members are stopped (no quorum, so no meta leader; stopping an
// embedded leader hands its leadership over at once, so a lost quorum
// stands in for the election that follows a node killed outright), the
// reader is asked for once the survivor says it has no leader, and one
// member comes back a second later. The reader replays the task's whole
// event log.
func TestEventReaderOpensOnceALeaderIsElected(t *testing.T) {
	scenario(t)
	// Regaining a lost quorum can take longer than the election after one
	// node is lost, which the product's bound is made for (seen: 13s).
	defer func(d time.Duration) { readerOpenRetryFor = d }(readerOpenRetryFor)
	readerOpenRetryFor = 45 * time.Second
	c := startReaderCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	b, err := Connect(ctx, Config{URL: c.urls, Replicas: 3, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rec := &schemas.TaskRecord{Task: schemas.Task{ID: schemas.NewID(), ContextID: "c", Status: schemas.TaskStatus{State: schemas.TaskStateSubmitted}}, Agent: "a"}
	rev, _, err := b.createTask(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	evs := []TaskEvent{
		{Status: &schemas.TaskStatusUpdateEvent{Status: schemas.TaskStatus{State: schemas.TaskStateWorking}}},
		{Status: &schemas.TaskStatusUpdateEvent{Status: schemas.TaskStatus{State: schemas.TaskStateCompleted}}},
	}
	if _, _, err := b.applyEvents(ctx, rec.Task.ID, rec, rev, evs); err != nil {
		t.Fatal(err)
	}
	// Keep the member this client is connected to; stop the other two.
	var down []int
	for i := range c.servers {
		if b.nc.ConnectedUrl() != c.clientURLs[i] {
			down = append(down, i)
			c.servers[i].Shutdown()
		}
	}
	leaderless := func() bool {
		actx, acancel := context.WithTimeout(ctx, time.Second)
		defer acancel()
		_, err := b.js.AccountInfo(actx)
		var api *jetstream.APIError
		return errors.As(err, &api) && api.ErrorCode == jsErrClusterNotAvailable
	}
	deadline := time.Now().Add(30 * time.Second)
	for !leaderless() {
		if time.Now().After(deadline) {
			t.Fatal("the surviving member never said it has no leader")
		}
		time.Sleep(100 * time.Millisecond) // the survivor notices the lost quorum
	}
	const back = time.Second
	restarted := make(chan struct{})
	go func() {
		defer close(restarted)
		time.Sleep(back) // the outage the reader must ride out
		if err := c.start(down[0]); err != nil {
			t.Error(err)
		}
	}()
	defer func() { <-restarted }()

	start := time.Now()
	r, err := b.ReadEvents(ctx, rec.Task.ID, 0, 16)
	if err != nil {
		t.Fatalf("opening a reader while the cluster had no leader: %v after %s", err, time.Since(start))
	}
	defer r.Close()
	t.Logf("reader opened %s after it was asked for with no leader (n%d restarted after %s)", time.Since(start), down[0], back)
	var states []schemas.TaskState
	for len(states) < len(evs) {
		select {
		case us, ok := <-r.C():
			if !ok {
				t.Fatalf("reader ended after %v: %v", states, r.Err())
			}
			for _, u := range us {
				states = append(states, u.Status.Status.State)
			}
		case <-ctx.Done():
			t.Fatalf("events read: %v; the rest never came", states)
		}
	}
	if states[0] != schemas.TaskStateWorking || states[1] != schemas.TaskStateCompleted {
		t.Fatalf("events read: %v", states)
	}
}
