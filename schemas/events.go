package schemas

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// The data of bus messages and KV values. Each has a JSON Schema in
// jsonschema/ that a worker in another language can be written from; the
// contract test in this package keeps the two in step.

// TaskRecord is the value stored in BucketTasks under the task id: the A2A
// task plus what the bus needs to route and answer for it. It is only ever
// changed by compare-and-swap on the KV revision.
type TaskRecord struct {
	Task Task `json:"task"`
	// Agent is the name of the agent that owns the task.
	Agent string `json:"agent"`
	// Reply is set when the agent answered with a Message instead of working
	// on a task; the edge then answers SendMessage with this message.
	Reply *Message `json:"reply,omitempty"`
	// CreatedAt is when the edge accepted the task.
	CreatedAt Timestamp `json:"createdAt"`
	// Dialect is DialectLegacy for tasks created through the older
	// tasks/send dialect ("" otherwise); ClientTaskID is then the id that
	// client chose, echoed back in its answers.
	Dialect      string `json:"dialect,omitempty"`
	ClientTaskID string `json:"clientTaskId,omitempty"`
	// Owner is the principal that created the task ("" when the edge
	// serves without authentication) and Tenant the tenant it was created
	// in: only that owner (or an admin) sees, continues, lists, follows or
	// cancels it. Fan-out children and remote tasks inherit their parent's.
	Owner  string `json:"owner,omitempty"`
	Tenant string `json:"tenant,omitempty"`
	// Origin is where an anonymous caller sent the task from (an IP
	// address, or an IPv6 /64 prefix), "" for an authenticated one: the
	// quota of unfinished tasks of anonymous callers is counted per
	// origin, as their rate is, so one cannot spend another's. Clients
	// never see it. Fan-out children inherit their parent's.
	Origin string `json:"origin,omitempty"`
	// Trust is the trust level of the call that created the task (the
	// edge's trust policy: local, private, public, or the operator's own
	// names), which its agents read to restrict themselves; fan-out
	// children inherit their parent's. Clients never see it.
	Trust string `json:"trust,omitempty"`
	// Traceparent is the W3C trace context of the call that created the
	// task, kept while the process traces (OpenTelemetry): what is done
	// for the task later under no call of its own — a re-queue by the
	// sweep, its push notifications — joins its trace. Clients never see
	// it.
	Traceparent string `json:"traceparent,omitempty"`
	// LastEventID is the CloudEvent id of the last event folded into the
	// record, so a writer retrying after an ambiguous failure can tell its
	// event already landed (and only re-publish it, which de-duplicates).
	LastEventID string `json:"lastEventId,omitempty"`
	// LastEventIndex is the sequence index of the last event of the write
	// that stored this revision (0 when it stored one event), so the
	// cursor of the record's last event is known without reading events.
	LastEventIndex int `json:"lastEventIndex,omitempty"`
	// Push is set once the task has had a push-notification config
	// (BucketPush), before the config is stored: what writes the task's
	// events learns from the record it holds whether anyone may be waiting
	// to be told, so a task without configs costs no lookup.
	Push bool `json:"push,omitempty"`
	// Generation is the task's A2A 1.1 generation: 1 when created, one
	// more for each event a write folds in (FoldWrite in bus), under the
	// same compare-and-swap as the rest of the record, so it is
	// contiguous per task whatever wrote it, wherever. 0 in a record
	// stored before generations were kept.
	Generation Generation `json:"generation,omitempty"`
	// Deadline is when the task must be done by, as its caller gave it
	// (MetaDeadline, or the older dialect's deadline), or a child its
	// parent's: a worker does not start a turn after it and ends a turn
	// running at it, the task FAILED with DeadlineExceeded. Nil: none.
	// Clients see it only as the metadata they sent.
	Deadline *Timestamp `json:"deadline,omitempty"`
	// Approval, when set, is the approval the task needed before it ran
	// (approval.go): while it is pending the task waits in AUTH_REQUIRED,
	// its work not queued. Clients see only its notices.
	Approval *Approval `json:"approval,omitempty"`
}

// PushWake is the data of a push sender's wake-up (TypePushWake on
// SubjectNotify): the task whose events to deliver.
type PushWake struct {
	TaskID string `json:"taskId"`
}

// PushConfigSet is the value under a task's id in BucketPush: the task's
// push-notification configs, in the order they were first created.
type PushConfigSet struct {
	Configs []PushConfigRecord `json:"configs"`
}

// Index is the position of the config with id, or -1.
func (s *PushConfigSet) Index(id string) int {
	for i := range s.Configs {
		if s.Configs[i].Config.ID == id {
			return i
		}
	}
	return -1
}

// PushConfigRecord is one stored push-notification config.
type PushConfigRecord struct {
	// Config is as the client registered it, with its task's id and its
	// own id (the client's, or one given at creation).
	Config TaskPushNotificationConfig `json:"config"`
	// Dialect is the A2A version the config came through ("1.0", "0.3"):
	// its notifications take that version's shape.
	Dialect   string    `json:"dialect,omitempty"`
	CreatedAt Timestamp `json:"createdAt"`
	// Delivered is the cursor of the task's last event this config is done
	// with (delivered, or dead-lettered after the attempts ran out): the
	// sender resumes after it. A config created for a running task starts
	// at the task's last event then; one sent with the message, at 0.
	Delivered uint64 `json:"delivered,omitempty"`
	// DeliveredSeq is the events-stream sequence the sender reads from:
	// no message before it holds an event after Delivered (0: the first).
	DeliveredSeq uint64 `json:"deliveredSeq,omitempty"`
	// Failing is set while the webhook refuses or does not answer, cleared
	// by its next success.
	Failing *PushFailure `json:"failing,omitempty"`
	// Disabled, when set, says why nothing is sent to the config any more
	// (the webhook answered 410 Gone).
	Disabled string `json:"disabled,omitempty"`
}

// PushFailure is the state of a config whose webhook fails.
type PushFailure struct {
	// Since is when the first failure of the run happened.
	Since Timestamp `json:"since"`
	// Attempts counts the failed attempts of the event being delivered.
	Attempts int `json:"attempts"`
	// LastError says what the last attempt met (a status, a timeout, a
	// refused address); never the URL or a credential.
	LastError string `json:"lastError"`
	// DeadLettered counts the events given up on and copied to the
	// dead-letter stream.
	DeadLettered int `json:"deadLettered,omitempty"`
}

// ContextClaim is the value under ContextKey(contextId) in
// BucketContexts: the principal and tenant of the context's first task
// (the one the server made it for, or the first to name a client-chosen
// id).
type ContextClaim struct {
	Owner  string `json:"owner"`
	Tenant string `json:"tenant,omitempty"`
}

// TaskIndexEntry is what a task index needs of a TaskRecord: who may see
// it and how it is listed, filtered, retained and expired.
type TaskIndexEntry struct {
	State   TaskState `json:"s"`
	At      int64     `json:"t"` // status time (StatusTime), Unix nanoseconds
	Agent   string    `json:"a"`
	Owner   string    `json:"o,omitempty"`
	Tenant  string    `json:"n,omitempty"`
	Context string    `json:"c,omitempty"`
	Origin  string    `json:"g,omitempty"`
	// Reply marks a message-only exchange: listed to no one.
	Reply bool `json:"r,omitempty"`
	// Push marks a task that has had push-notification configs
	// (TaskRecord.Push): its configs are deleted with it.
	Push bool `json:"p,omitempty"`
	// Approval is when the task's pending approval expires (Unix
	// nanoseconds); 0 when none is pending. The sweep settles it then, and
	// approvers list the tasks that have one.
	Approval int64 `json:"v,omitempty"`
}

// IndexEntry returns the record's TaskIndexEntry. Its time is the status
// time as the record stores it (to the millisecond), so the entry and the
// record read back agree.
func (r *TaskRecord) IndexEntry() TaskIndexEntry {
	return TaskIndexEntry{State: r.Task.Status.State, At: r.StatusTime().Truncate(time.Millisecond).UnixNano(), Agent: r.Agent,
		Owner: r.Owner, Tenant: r.Tenant, Context: r.Task.ContextID, Origin: r.Origin, Reply: r.Reply != nil, Push: r.Push, Approval: r.pendingApproval()}
}

// pendingApproval is when the record's pending approval expires, 0 for
// none: a finished task has none, whatever its record says.
func (r *TaskRecord) pendingApproval() int64 {
	if !r.Approval.Pending() || r.Task.Status.State.Terminal() {
		return 0
	}
	return r.Approval.ExpiresAt.UnixNano()
}

// WorkItem is the data of a TypeWorkExecute event on
// SubjectWorkTask(agent, taskId): run the task with this message. The
// task's current state, history included, is in BucketTasks; workers read
// it from there.
type WorkItem struct {
	TaskID    string  `json:"taskId"`
	ContextID string  `json:"contextId"`
	Agent     string  `json:"agent"`
	Message   Message `json:"message"`
	// TaskRevision is the task record's revision in BucketTasks that this
	// item submits (the write that made the task SUBMITTED). A worker that
	// reads an older revision, or no record, read a replica that lags and
	// reads again from the stream leader; 0 (unknown) skips that check.
	TaskRevision uint64 `json:"taskRevision,omitempty"`
	// Record is the task record as stored at TaskRevision, carried when it
	// is small (its submitter queues it so: bus.Submit), so the worker of the first
	// delivery runs without reading the store back. It is a snapshot: the
	// worker's first write must find the task unchanged since (the same
	// lastEventId), or it drops the work, as it would have had it read a
	// canceled task or one another delivery took. Optional: a worker may
	// ignore it and read the store.
	Record json.RawMessage `json:"record,omitempty"`
}

// CancelNotice is the data of a TypeTaskCancel event on SubjectCancel(agent):
// the task was canceled and whichever worker runs it should stop. Notices are
// best-effort (core NATS); workers also see the terminal state in KV.
type CancelNotice struct {
	TaskID string `json:"taskId"`
	Agent  string `json:"agent"`
}

// AgentRegistration is the value stored in BucketAgents under the agent name
// by every worker group of that agent, refreshed by heartbeat.
type AgentRegistration struct {
	Agent     string    `json:"agent"`
	Card      AgentCard `json:"card"`
	Instance  string    `json:"instance"`
	UpdatedAt Timestamp `json:"updatedAt"`
	// CardSince is when Card last changed: kept by every refresh that
	// registers the same card, so it is the same for every worker of the
	// agent and every edge serving its card (the card's Last-Modified).
	CardSince *Timestamp `json:"cardSince,omitempty"`
	// Remote is set for an agent whose work is proxied to an external A2A
	// agent: where it is and how reachable it was at the last check.
	Remote *RemoteAgentStatus `json:"remote,omitempty"`
	// SpendsTokens is set for an agent whose runs spend model tokens
	// counted against token budgets (the llm kind): edges refuse its new
	// tasks while a tokens budget of the caller is spent.
	SpendsTokens bool `json:"spendsTokens,omitempty"`
	// MakesTasks is set for an agent that answers every message with a
	// task, never with a message alone: an edge then opens a streamed
	// send with the task at once, where it otherwise waits for the
	// agent's first event to learn which answer the stream carries.
	MakesTasks bool `json:"makesTasks,omitempty"`
	// Maintenance is not stored here: readers of the registry set it from
	// the agent's RegistryEntry (why an admin put it in maintenance).
	Maintenance string `json:"maintenance,omitempty"`
}

// RegistryEntry is the value under an agent's name in BucketRegistry:
// what an admin set for the agent at run time.
type RegistryEntry struct {
	Agent string `json:"agent"`
	// Remote, when set, is a remote agent that every serve and worker
	// process running registered agents runs, added, changed and removed
	// without a restart.
	Remote *RemoteAgentSpec `json:"remote,omitempty"`
	// Maintenance, when set, says why the agent is in maintenance: the
	// registry shows it so, routers pass it over, and edges refuse new
	// tasks for it.
	Maintenance string    `json:"maintenance,omitempty"`
	UpdatedAt   Timestamp `json:"updatedAt"`
	// UpdatedBy is the admin principal that made the change.
	UpdatedBy string `json:"updatedBy,omitempty"`
}

// RemoteAgentSpec is a remote agent registered at run time. It holds no
// secret: a credential is named by the environment variable of the worker
// processes that holds it.
type RemoteAgentSpec struct {
	// URL is the external agent's base URL.
	URL string `json:"url"`
	// Headers are sent with every request (values that are not secrets).
	Headers map[string]string `json:"headers,omitempty"`
	// HeadersFromEnv are headers whose values the worker processes read
	// from their environment: header name → variable name.
	HeadersFromEnv map[string]string `json:"headersFromEnv,omitempty"`
	// CheckEvery is how often its card and health are re-checked
	// ("30s"); default 1m.
	CheckEvery string `json:"checkEvery,omitempty"`
	// Binding prefers one of its interfaces: JSONRPC, HTTP+JSON or GRPC.
	Binding string `json:"binding,omitempty"`
	// Tags are added to its skills' tags (for search and routing).
	Tags []string `json:"tags,omitempty"`
	// Push asks it for push notifications instead of streams.
	Push bool `json:"push,omitempty"`
}

// Health of an external agent as the last checks saw it.
const (
	// HealthOnline: the last check reached the agent and read a valid card.
	HealthOnline = "online"
	// HealthDegraded: the last check failed, but the agent was reached
	// before and its cached card is still served.
	HealthDegraded = "degraded"
	// HealthOffline: the agent has not been reached, or not for so long
	// that its cached card expired.
	HealthOffline = "offline"
	// HealthMaintenance: an admin took the agent out of service
	// (RegistryEntry.Maintenance); it is shown, not checked.
	HealthMaintenance = "maintenance"
)

// RemoteAgentStatus describes the external agent behind a remote agent.
type RemoteAgentStatus struct {
	// URL is the external agent's base URL as configured.
	URL string `json:"url"`
	// Health is HealthOnline, HealthDegraded or HealthOffline.
	Health string `json:"health"`
	// LastSeen is when the agent last answered a check; absent if never.
	LastSeen *Timestamp `json:"lastSeen,omitempty"`
	// CheckedAt is when the last check ran.
	CheckedAt *Timestamp `json:"checkedAt,omitempty"`
	// LastError says why the last failed check failed.
	LastError string `json:"lastError,omitempty"`
}

// ErrTaskTerminal is returned by the Apply methods when the task is already
// in a terminal state: the event is absorbed and must not be stored.
var ErrTaskTerminal = errors.New("task is in a terminal state")

// ErrBadTransition is returned by ApplyStatus for a move the state machine
// does not allow.
var ErrBadTransition = errors.New("state transition not allowed")

// ApplyStatus folds a status update into the record. A status message is
// also appended to the history so the conversation stays chronological, and
// the update's metadata is merged into the task's: that is how an agent
// annotates its task (a remote agent records the external task id there).
func (r *TaskRecord) ApplyStatus(ev *TaskStatusUpdateEvent) error {
	cur := r.Task.Status.State
	if cur.Terminal() {
		return ErrTaskTerminal
	}
	if !CanTransition(cur, ev.Status.State) {
		return ErrBadTransition
	}
	st := ev.Status
	if st.Timestamp == nil {
		st.Timestamp = Now()
	}
	r.Task.Status = st
	if st.Message != nil && !approvalNotice(st.Message) {
		r.Task.History = append(r.Task.History, *st.Message)
	}
	if len(ev.Metadata) > 0 {
		if r.Task.Metadata == nil {
			r.Task.Metadata = map[string]any{}
		}
		for k, v := range ev.Metadata {
			r.Task.Metadata[k] = v
		}
	}
	return nil
}

// ApplyArtifact folds an artifact update into the record: a new artifact id
// is added, an existing one is replaced, or with Append its parts are
// extended.
func (r *TaskRecord) ApplyArtifact(ev *TaskArtifactUpdateEvent) error {
	if r.Task.Status.State.Terminal() {
		return ErrTaskTerminal
	}
	for i := range r.Task.Artifacts {
		a := &r.Task.Artifacts[i]
		if a.ArtifactID != ev.Artifact.ArtifactID {
			continue
		}
		if ev.Append {
			a.Parts = append(a.Parts, ev.Artifact.Parts...)
			if ev.Artifact.Name != "" {
				a.Name = ev.Artifact.Name
			}
			if ev.Artifact.Description != "" {
				a.Description = ev.Artifact.Description
			}
			for k, v := range ev.Artifact.Metadata {
				if a.Metadata == nil {
					a.Metadata = map[string]any{}
				}
				a.Metadata[k] = v
			}
		} else {
			*a = ev.Artifact
		}
		return nil
	}
	r.Task.Artifacts = append(r.Task.Artifacts, ev.Artifact)
	return nil
}

// ApplyReply records a direct Message reply: the exchange is complete and the
// caller is answered with the message rather than a task.
func (r *TaskRecord) ApplyReply(m *Message) error {
	if r.Task.Status.State.Terminal() {
		return ErrTaskTerminal
	}
	r.Reply = m
	r.Task.History = append(r.Task.History, *m)
	r.Task.Status = TaskStatus{State: TaskStateCompleted, Timestamp: Now()}
	return nil
}

// ErrNotInterrupted is returned by ApplyContinue when the task is not
// waiting for the client.
var ErrNotInterrupted = errors.New("task is not waiting for input")

// ApplyContinue adds a client's answer to an interrupted task and queues it
// again (SUBMITTED). Only one answer can win: the next finds the task no
// longer interrupted.
func (r *TaskRecord) ApplyContinue(m *Message) error {
	st := r.Task.Status.State
	if st.Terminal() {
		return ErrTaskTerminal
	}
	if !st.Interrupted() {
		return ErrNotInterrupted
	}
	if r.Approval.Pending() {
		return ErrAwaitingApproval
	}
	r.Task.History = append(r.Task.History, *m)
	r.Task.Status = TaskStatus{State: TaskStateSubmitted, Timestamp: Now()}
	return nil
}

// TrimHistory keeps at most max most recent messages (max <= 0: no cap).
func (r *TaskRecord) TrimHistory(max int) {
	if max > 0 && len(r.Task.History) > max {
		r.Task.History = append([]Message(nil), r.Task.History[len(r.Task.History)-max:]...)
	}
}

// StatusTime returns the task's status timestamp, or the creation time.
func (r *TaskRecord) StatusTime() time.Time {
	if r.Task.Status.Timestamp != nil {
		return r.Task.Status.Timestamp.Time
	}
	return r.CreatedAt.Time
}

// WithHistoryLength returns a shallow copy of t whose history holds at most
// n most recent messages: n nil = all, 0 = none. Callers validate n >= 0.
func (t Task) WithHistoryLength(n *int32) Task {
	if n == nil {
		return t
	}
	if *n == 0 {
		t.History = nil
		return t
	}
	if l := len(t.History); l > int(*n) {
		t.History = t.History[l-int(*n):]
	}
	return t
}

// ReadNotification reads a push notification's body as a StreamResponse:
// an A2A 1.0 one as it is, or the task a 0.3 sender posts ("kind": "task"),
// converted. taskID is the task it is of.
func ReadNotification(body []byte) (sr *StreamResponse, taskID string, err error) {
	var probe struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(body, &probe); err != nil {
		return nil, "", fmt.Errorf("the notification is not JSON: %v", err)
	}
	if probe.Kind == "task" {
		var t03 V03Task
		if err := json.Unmarshal(body, &t03); err != nil || t03.ID == "" {
			return nil, "", fmt.Errorf("the notification is not an A2A 0.3 task: %v", err)
		}
		t, err := TaskFromV03(t03)
		if err != nil {
			return nil, "", fmt.Errorf("the notification's 0.3 task: %v", err)
		}
		return &StreamResponse{Task: &t}, t.ID, nil
	}
	sr = new(StreamResponse)
	if err := json.Unmarshal(body, sr); err != nil {
		return nil, "", fmt.Errorf("the notification is not an A2A StreamResponse: %v", err)
	}
	switch {
	case sr.StatusUpdate != nil:
		taskID = sr.StatusUpdate.TaskID
	case sr.ArtifactUpdate != nil:
		taskID = sr.ArtifactUpdate.TaskID
	case sr.Task != nil:
		taskID = sr.Task.ID
	case sr.Message != nil:
		taskID = sr.Message.TaskID
	default:
		return nil, "", errors.New("the notification is a StreamResponse with no event")
	}
	return sr, taskID, nil
}
