package bus

import (
	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// readJSON decodes JSON that travels on the bus — task records, work
// items, task events, index entries, written by a2abus or by a worker in
// another language — reading it as encoding/json reads it: member names
// matched to fields without regard to case (underscores and dashes kept
// significant), invalid UTF-8 read as U+FFFD, a repeated member's values
// applied in order. It decodes with go-json-experiment/json, the prototype
// of the standard library's encoding/json/v2 (in Go 1.26 behind
// GOEXPERIMENT=jsonv2, where this package becomes an alias of it), which
// reads in one pass what encoding/json scans twice or more: an edge's hub
// reads every event of a followed task, a worker every record it updates.
// Writing stays encoding/json's (its output is what clients and workers
// already read); FuzzReadJSON holds the two readings equal.
func readJSON(data []byte, v any) error {
	return jsonv2.Unmarshal(data, v, v1Reading)
}

var v1Reading = jsonv2.JoinOptions(jsonv1.MergeWithLegacySemantics(true),
	jsonv2.MatchCaseInsensitiveNames(true),
	jsonv1.MatchCaseSensitiveDelimiter(true),
	jsontext.AllowInvalidUTF8(true),
	jsontext.AllowDuplicateNames(true),
)
