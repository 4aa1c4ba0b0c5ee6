package schemas

import "time"

// Deadlines: a caller gives a new task a time by which it must be done.
// The edge reads it once, from whichever form the caller's dialect has
// (DeadlineOf, LegacyDeadline), and the task record keeps it
// (TaskRecord.Deadline); workers enforce it. A2A has no deadline field, so
// a2abus reads and forwards it as metadata (MetaDeadline).

// MetaDeadline is the metadata key under which a caller gives a new task
// its deadline, in a message's metadata or a send's own: an RFC 3339 time,
// or a Go duration counted from when the edge receives the send. The
// remote agent kind forwards a task's deadline to the external agent
// under it, as an RFC 3339 time.
const MetaDeadline = "a2abus.deadline"

// DeadlineExceeded is the status message of a task FAILED because its
// deadline passed.
const DeadlineExceeded = "deadline exceeded"

// deadlineForms is what an invalid deadline's error says is accepted.
const deadlineForms = `an RFC 3339 time ("2026-01-02T15:04:05Z") or a positive Go duration counted from now ("30s", "5m")`

// DeadlineOf reads a send's deadline, the earlier of the one in its
// message's metadata and the one in its own; now is when the send was
// received (what a duration counts from). It returns the zero time when
// neither gives one, and an ErrInvalidParams occurrence naming the field
// when one is not a deadline or has already passed.
func (r *SendMessageRequest) DeadlineOf(now time.Time) (time.Time, error) {
	var out time.Time
	var err error
	if r.Message != nil {
		if out, err = metaDeadline("message.metadata", r.Message.Metadata, now); err != nil {
			return time.Time{}, err
		}
	}
	d, err := metaDeadline("metadata", r.Metadata, now)
	if err != nil {
		return time.Time{}, err
	}
	return EarlierDeadline(out, d), nil
}

// metaDeadline reads the deadline under MetaDeadline in md (found at
// where), the zero time when there is none.
func metaDeadline(where string, md map[string]any, now time.Time) (time.Time, error) {
	v, ok := md[MetaDeadline]
	if !ok {
		return time.Time{}, nil
	}
	field := where + `["` + MetaDeadline + `"]`
	s, ok := v.(string)
	if !ok {
		return time.Time{}, InvalidField(field, "must be a string: %s", deadlineForms)
	}
	var at time.Time
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, InvalidField(field, "%q is not a positive duration: %s", s, deadlineForms)
		}
		at = now.Add(d)
	} else if at, err = ParseTimestamp(s); err != nil {
		return time.Time{}, InvalidField(field, "%q is not a deadline: %s", s, deadlineForms)
	}
	return checkDeadline(field, at, now)
}

// LegacyDeadline reads the older dialect's deadline (as Aleph sends it: a
// top-level "deadline" of whole seconds since the Unix epoch), checked as
// DeadlineOf checks the metadata's.
func LegacyDeadline(sec int64, now time.Time) (time.Time, error) {
	// Beyond year 9999 RFC 3339 cannot write it (see ParseTimestamp).
	if sec <= 0 || sec > 253402300799 {
		return time.Time{}, InvalidField("deadline", "%d is not a time: it is whole seconds since the Unix epoch", sec)
	}
	return checkDeadline("deadline", time.Unix(sec, 0), now)
}

// checkDeadline refuses a deadline that is not after now, and gives the
// rest as a record keeps it (UTC, milliseconds).
func checkDeadline(field string, at, now time.Time) (time.Time, error) {
	if !at.After(now) {
		return time.Time{}, InvalidField(field, "%s has already passed (now is %s)", at.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	return at.UTC().Truncate(time.Millisecond), nil
}

// EarlierDeadline is the earlier of two deadlines, the zero time meaning
// none.
func EarlierDeadline(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	}
	return b
}
