package bus

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/a2abus/a2abus/schemas"
)

// BenchmarkDecodeBatch reads one write of 100 streamed artifact chunks as
// every edge's hub with a reader of the task reads it (decodeUpdates):
//
//	go test ./bus -run '^$' -bench DecodeBatch -benchmem
func BenchmarkDecodeBatch(b *testing.B) {
	bs := &Bus{source: "urn:a2abus:worker:bench"}
	var evs []outEvent
	for i := range 100 {
		data := &schemas.TaskArtifactUpdateEvent{TaskID: "0b6f2a52-7c1e-4d8a-9f3b-2a6e5c4d1f00", ContextID: "c7d9e2f1-3a4b-4c5d-8e6f-7a8b9c0d1e2f",
			Artifact: schemas.Artifact{ArtifactID: "c", Parts: []schemas.Part{schemas.TextPart("chunk " + strconv.Itoa(i))}}, Append: i > 0}
		ev, err := bs.newEvent(fmt.Sprintf("0b6f2a52-7c1e-4d8a-9f3b-2a6e5c4d1f00.5.%d", i), schemas.TypeTaskArtifact, "0b6f2a52-7c1e-4d8a-9f3b-2a6e5c4d1f00", data,
			attr{schemas.ExtSequence, schemas.SequenceString(5)}, attr{schemas.ExtSequenceIndex, strconv.Itoa(i)})
		if err != nil {
			b.Fatal(err)
		}
		evs = append(evs, ev)
	}
	m, err := encodeBatch("a2a.events.0b6f2a52-7c1e-4d8a-9f3b-2a6e5c4d1f00", evs)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(m.Data)))
	for b.Loop() {
		us, err := decodeUpdates(m)
		if err != nil || len(us) != 100 {
			b.Fatal(len(us), err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*100), "ns/event")
}
