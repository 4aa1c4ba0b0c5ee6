package schemas

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDeadlineForms(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(md map[string]any) *SendMessageRequest {
		return &SendMessageRequest{Message: &Message{Metadata: md}}
	}
	for _, tc := range []struct {
		name string
		req  *SendMessageRequest
		want time.Time
		err  string // a piece of the error's message; "" for none
	}{
		{"none", at(nil), time.Time{}, ""},
		{"rfc3339", at(map[string]any{MetaDeadline: "2026-03-01T12:00:30.5Z"}), now.Add(30500 * time.Millisecond), ""},
		{"rfc3339 zone", at(map[string]any{MetaDeadline: "2026-03-01T13:01:00+01:00"}), now.Add(time.Minute), ""},
		{"duration", at(map[string]any{MetaDeadline: "90s"}), now.Add(90 * time.Second), ""},
		{"request metadata", &SendMessageRequest{Message: &Message{}, Metadata: map[string]any{MetaDeadline: "1m"}}, now.Add(time.Minute), ""},
		{"earlier of both", &SendMessageRequest{Message: &Message{Metadata: map[string]any{MetaDeadline: "2m"}}, Metadata: map[string]any{MetaDeadline: "1m"}}, now.Add(time.Minute), ""},
		{"not a string", at(map[string]any{MetaDeadline: 30.0}), time.Time{}, `message.metadata["a2abus.deadline"] must be a string`},
		{"gibberish", at(map[string]any{MetaDeadline: "soon"}), time.Time{}, `"soon" is not a deadline: an RFC 3339 time`},
		{"negative duration", at(map[string]any{MetaDeadline: "-5s"}), time.Time{}, "not a positive duration"},
		{"passed", at(map[string]any{MetaDeadline: "2026-03-01T11:59:59Z"}), time.Time{}, "has already passed"},
		{"request metadata passed", &SendMessageRequest{Message: &Message{}, Metadata: map[string]any{MetaDeadline: "2020-01-01T00:00:00Z"}}, time.Time{}, `metadata["a2abus.deadline"] 2020-01-01T00:00:00Z has already passed`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.req.DeadlineOf(now)
			if tc.err != "" {
				if !errors.Is(err, ErrInvalidParams) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want InvalidParams saying %q", err, tc.err)
				}
				return
			}
			if err != nil || !got.Equal(tc.want) {
				t.Fatalf("DeadlineOf = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestLegacyDeadline(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	got, err := LegacyDeadline(now.Unix()+60, now)
	if err != nil || !got.Equal(now.Add(time.Minute)) {
		t.Fatalf("LegacyDeadline = %v, %v", got, err)
	}
	for _, sec := range []int64{now.Unix(), 0, -1, 1 << 62} {
		if _, err := LegacyDeadline(sec, now); !errors.Is(err, ErrInvalidParams) || !strings.HasPrefix(err.Error(), "deadline ") {
			t.Errorf("LegacyDeadline(%d) = %v, want an InvalidParams naming deadline", sec, err)
		}
	}
}

func TestEarlierDeadline(t *testing.T) {
	a, b := time.Unix(100, 0), time.Unix(200, 0)
	for _, tc := range [][3]time.Time{{a, b, a}, {b, a, a}, {{}, b, b}, {a, {}, a}, {{}, {}, {}}} {
		if got := EarlierDeadline(tc[0], tc[1]); !got.Equal(tc[2]) {
			t.Errorf("EarlierDeadline(%v, %v) = %v", tc[0], tc[1], got)
		}
	}
}
