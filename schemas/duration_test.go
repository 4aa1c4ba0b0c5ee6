package schemas

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestDurationReadsStringsAndNanoseconds(t *testing.T) {
	for in, want := range map[string]time.Duration{`"30s"`: 30 * time.Second, `"1h5m"`: time.Hour + 5*time.Minute, `1000000`: time.Millisecond, `"0s"`: 0} {
		var d Duration
		if err := json.Unmarshal([]byte(in), &d); err != nil || time.Duration(d) != want {
			t.Errorf("%s: %v (%v), want %v", in, time.Duration(d), err, want)
		}
	}
	for _, in := range []string{`"soon"`, `true`, `{"s":1}`} {
		var d Duration
		if err := json.Unmarshal([]byte(in), &d); err == nil {
			t.Errorf("%s: no error", in)
		} else if in == `true` && !strings.Contains(err.Error(), `"30s"`) {
			t.Errorf("%s: %v does not say what a duration looks like", in, err)
		}
	}
	if b, err := json.Marshal(Duration(90 * time.Second)); err != nil || string(b) != `"1m30s"` {
		t.Fatalf("marshal: %s %v", b, err)
	}
}
