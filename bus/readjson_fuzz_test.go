package bus

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/a2abus/a2abus/schemas"
)

// FuzzReadJSON: whatever encoding/json reads into a task record, a work
// item, a batch of task events or an index entry, readJSON reads the same;
// what encoding/json refuses, readJSON refuses. (Only the decoded values
// and whether there was an error are compared, not the error's text.)
func FuzzReadJSON(f *testing.F) {
	for _, seed := range []string{
		`{"task":{"id":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING","timestamp":"2030-01-02T03:04:05.5Z"},"history":[{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"},{"data":{"a":[1,2.5,"x",null,true]}},{"raw":"AAE=","mediaType":"image/png"}]}],"artifacts":[{"artifactId":"a","parts":[{"url":"https://x"}]}],"metadata":{"k":{"n":1}}},"agent":"echo","owner":"u"}`,
		`{"TASK":{"ID":"t","Status":{"State":"x"}},"task":{"id":"u"}}`,
		`{"task":{"id":"t\ud800\u00e9"},"agent":"a\xff"}`,
		`{"taskId":"t","contextId":"c","agent":"echo","message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hello"}]},"taskRevision":7}`,
		`[{"specversion":"1.0","id":"a","source":"s","type":"dev.a2abus.task.status.v1","sequence":"3","data":{"taskId":"t","status":{"state":"TASK_STATE_WORKING"},"metadata":{"x":1}}}]`,
		`{"state":"TASK_STATE_COMPLETED","agent":"echo","contextId":"c","owner":"o","created":"2030-01-02T03:04:05Z","updated":"2030-01-02T03:04:06Z"}`,
		`{"task_id":"t","task-id":"u","taskid":"v"}`,
		`{"a":1e400}`, `{"metadata":{"a":1,"a":{"b":2}}}`, `null`, `[]`, `{"task":null}`,
	} {
		f.Add([]byte(seed))
	}
	targets := []func() any{
		func() any { return new(schemas.TaskRecord) },
		func() any { return new(schemas.WorkItem) },
		func() any { return new([]batchEvent) },
		func() any { return new(schemas.TaskIndexEntry) },
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, target := range targets {
			std, ours := target(), target()
			stdErr, ourErr := json.Unmarshal(data, std), readJSON(data, ours)
			if (stdErr == nil) != (ourErr == nil) {
				t.Fatalf("%T from %q: encoding/json says %v, readJSON %v", std, data, stdErr, ourErr)
			}
			if stdErr == nil && !reflect.DeepEqual(std, ours) {
				t.Fatalf("%T from %q:\nencoding/json %+v\nreadJSON      %+v", std, data, std, ours)
			}
		}
	})
}
