package bus

import (
	"os"
	"regexp"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// Every stream and bucket schemas names is a row of the contract table,
// and every row is whole: what provisioning, binding, the permissions and
// the write probe derive from it is there.
func TestEveryStreamAndBucketIsInTheContract(t *testing.T) {
	src, err := os.ReadFile("../schemas/names.go")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	for _, s := range contract {
		switch {
		case (s.bucket == "") == (s.stream == ""):
			t.Errorf("row %q %q: name a stream or a bucket", s.stream, s.bucket)
		case s.bucket == "" && (s.streamConfig == nil || s.streamConfig(Config{}, jetstream.MemoryStorage).Name != s.stream):
			t.Errorf("stream %s: its configuration must name it", s.stream)
		case s.bucket != "" && (s.kvConfig == nil || s.kv == nil || s.kvConfig(Config{}, jetstream.MemoryStorage).Bucket != s.bucket):
			t.Errorf("bucket %s: its configuration must name it, and it needs a handle", s.bucket)
		}
		if len(s.subjects()) == 0 || len(s.writers) == 0 {
			t.Errorf("%s: no subjects or no writers", s.name())
		}
		rows[s.stream+s.bucket] = true
	}
	names := regexp.MustCompile(`(?m)^\s*(Stream|Bucket)[A-Za-z]+\s*=\s*"([^"]+)"`).FindAllSubmatch(src, -1)
	if len(names) < 10 {
		t.Fatalf("found %d stream and bucket names in schemas/names.go; the pattern no longer matches it", len(names))
	}
	for _, m := range names {
		if !rows[string(m[2])] {
			t.Errorf("%s is named in schemas/names.go but has no row in the contract table (bus/contract.go)", m[2])
		}
	}
	if len(rows) != len(names) {
		t.Errorf("the contract has %d rows, schemas names %d streams and buckets", len(rows), len(names))
	}
}
