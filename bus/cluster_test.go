package bus

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/a2abus/a2abus/schemas"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Three embedded servers form a JetStream cluster on loopback; streams and
// buckets are R3; a task written before a member stops is read after, and
// new tasks are taken while it is down.
func TestThreeNodeClusterSurvivesLosingAMember(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster")
	}
	const n = 3
	var clientPorts, routePorts [n]int
	for i := range n {
		clientPorts[i], routePorts[i] = freePort(t), freePort(t)
	}
	var routes []string
	for i := range n {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", routePorts[i]))
	}
	var servers [n]*Server
	for i := range n {
		s, err := StartServer(ServerConfig{
			Name: fmt.Sprintf("n%d", i), DataDir: t.TempDir(),
			Listen:      fmt.Sprintf("127.0.0.1:%d", clientPorts[i]),
			ClusterName: "a2abus-test", ClusterListen: fmt.Sprintf("127.0.0.1:%d", routePorts[i]), Routes: routes,
		})
		if err != nil {
			t.Fatal(err)
		}
		servers[i] = s
		t.Cleanup(s.Shutdown)
	}
	var urls string
	for i := range n {
		if i > 0 {
			urls += ","
		}
		urls += fmt.Sprintf("nats://127.0.0.1:%d", clientPorts[i])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b, err := Connect(ctx, Config{URL: urls, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rec := &schemas.TaskRecord{Task: schemas.Task{ID: schemas.NewID(), ContextID: "c", Status: schemas.TaskStatus{State: schemas.TaskStateSubmitted}}, Agent: "a"}
	if _, err := b.CreateTask(ctx, rec); err != nil {
		t.Fatal(err)
	}
	// Stop the member this client is connected to, if it is one of ours.
	victim := 0
	for i := range n {
		if b.nc.ConnectedUrl() == fmt.Sprintf("nats://127.0.0.1:%d", clientPorts[i]) {
			victim = i
		}
	}
	servers[victim].Shutdown()

	deadline := time.Now().Add(30 * time.Second)
	for {
		got, _, err := b.GetTask(ctx, rec.Task.ID)
		if err == nil && got.Task.ID == rec.Task.ID {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("task unreadable after losing a member: %v", err)
		}
		time.Sleep(100 * time.Millisecond) // the client reconnects and a new leader is elected
	}
	for {
		_, err := b.CreateTask(ctx, &schemas.TaskRecord{Task: schemas.Task{ID: schemas.NewID(), Status: schemas.TaskStatus{State: schemas.TaskStateSubmitted}}, Agent: "a"})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no writes after losing a member: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
