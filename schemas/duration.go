package schemas

import (
	"encoding/json"
	"fmt"
	"time"
)

// Duration is a time.Duration that JSON writes as a Go duration string
// ("30s", "5m"): the one duration type of a2abus's configuration (the
// config file, agents' options, exec timeouts). It reads a string, or a
// number of nanoseconds.
type Duration time.Duration

// UnmarshalJSON reads "30s" style strings (or a number of nanoseconds).
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n int64
		if json.Unmarshal(b, &n) != nil {
			return fmt.Errorf("a duration is a string like \"30s\" (got %s)", trimJSON(b))
		}
		*d = Duration(n)
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// trimJSON bounds a JSON value repeated in an error message.
func trimJSON(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "…"
	}
	return string(b)
}
