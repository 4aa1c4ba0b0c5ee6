package grpcbinding

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/a2abus/a2abus/edge/grpcbinding/a2apb"
)

// heldStream is a stream whose client reads the first event and then
// stops: its next Send waits until the stream is reset (release).
type heldStream struct {
	grpc.ServerStreamingServer[a2apb.StreamResponse]
	sent    int
	release chan struct{}
}

func (h *heldStream) Send(*a2apb.StreamResponse) error {
	if h.sent++; h.sent == 1 {
		return nil
	}
	<-h.release
	return errors.New("stream reset")
}

// A client that stops reading loses its stream after the write timeout,
// and the write held meanwhile ends once the stream is reset.
func TestAStalledStreamIsGivenUp(t *testing.T) {
	h := &heldStream{release: make(chan struct{})}
	s := sender(h, 20*time.Millisecond)
	if err := s.send(&a2apb.StreamResponse{}); err != nil {
		t.Fatalf("the first event: %v", err)
	}
	if err := s.send(&a2apb.StreamResponse{}); !errors.Is(err, errStalled) {
		t.Fatalf("the held event: %v, want the stream given up", err)
	}
	s.close()
	close(h.release) // the handler returned: gRPC resets the stream
}
