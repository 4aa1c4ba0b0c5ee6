package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Reads that decide. A KV Get is a JetStream "direct get", which any
// replica of the bucket's stream may answer (and mirrors with
// MirrorDirect): on a cluster a follower that has not yet applied a write
// answers with the state before it. That is fine for a client polling a
// task, and wrong for a reader that acts on what it read: a worker that
// finds no task drops the work, an edge that finds the task not yet
// waiting for input refuses the client's answer. Such readers confirm a
// missing or older-than-expected record with leaderGet, which only the
// stream leader answers, and whose answer includes every write that was
// acknowledged before it was asked.

// apiMsgGet is the JetStream API subject prefix of a message get
// answered by the stream leader ($JS.API.STREAM.MSG.GET.<stream>).
const apiMsgGet = "$JS.API.STREAM.MSG.GET."

// errNoMessage is leaderGet's answer when the subject holds no message.
var errNoMessage = errors.New("bus: no message on subject")

// storedMsg is a message as the leader read it.
type storedMsg struct {
	Seq    uint64
	Header nats.Header
	Data   []byte
	Time   time.Time // when the stream stored it
}

// leaderGet returns the last message on subject in stream, as the stream
// leader has it. It returns errNoMessage if there is none, and an error
// matching schemas.ErrUnavailable when no leader answers (one is being
// elected, or the bus is unreachable).
func (b *Bus) leaderGet(ctx context.Context, stream, subject string) (*storedMsg, error) {
	return b.storedMsg(ctx, stream, storedMsgRequest{LastBySubject: subject})
}

// storedMsgRequest picks a message for storedMsg: the last on a subject,
// the one at a sequence, or the first at or after Seq on NextBySubject.
type storedMsgRequest struct {
	LastBySubject string `json:"last_by_subj,omitempty"`
	Seq           uint64 `json:"seq,omitempty"`
	NextBySubject string `json:"next_by_subj,omitempty"`
}

// storedMsg reads one message of stream through its leader; see leaderGet.
func (b *Bus) storedMsg(ctx context.Context, stream string, pick storedMsgRequest) (*storedMsg, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, attemptLimit)
		defer cancel()
	}
	req, err := json.Marshal(pick)
	if err != nil {
		return nil, err
	}
	resp, err := b.nc.RequestWithContext(ctx, apiMsgGet+stream, req)
	if err != nil {
		return nil, errUnavailable("bus: read "+stream, err)
	}
	var r struct {
		Error *jetstream.APIError `json:"error"`
		Msg   *struct {
			Seq    uint64    `json:"seq"`
			Header []byte    `json:"hdrs"`
			Data   []byte    `json:"data"`
			Time   time.Time `json:"time"`
		} `json:"message"`
	}
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		return nil, fmt.Errorf("bus: read %s: undecodable answer: %w", stream, err)
	}
	if r.Error != nil {
		if r.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound {
			return nil, errNoMessage
		}
		return nil, errUnavailable("bus: read "+stream, r.Error)
	}
	if r.Msg == nil {
		return nil, fmt.Errorf("bus: read %s: empty answer", stream)
	}
	m := &storedMsg{Seq: r.Msg.Seq, Data: r.Msg.Data, Time: r.Msg.Time}
	if len(r.Msg.Header) > 0 {
		if m.Header, err = nats.DecodeHeadersMsg(r.Msg.Header); err != nil {
			return nil, fmt.Errorf("bus: read %s: headers: %w", stream, err)
		}
	}
	return m, nil
}

// leaderGetKey reads a KV key through the bucket stream's leader. A key
// whose last message is a delete, purge or expiry marker is reported as
// jetstream.ErrKeyNotFound, as for a key never written.
func (b *Bus) leaderGetKey(ctx context.Context, bucket, key string) (val []byte, rev uint64, err error) {
	m, err := b.leaderGet(ctx, kvStream(bucket), kvPrefix(bucket)+key)
	if errors.Is(err, errNoMessage) {
		return nil, 0, jetstream.ErrKeyNotFound
	}
	if err != nil {
		return nil, 0, err
	}
	if kvOperation(m.Header) != jetstream.KeyValuePut {
		return nil, 0, jetstream.ErrKeyNotFound
	}
	return m.Data, m.Seq, nil
}
