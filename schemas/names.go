package schemas

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"

	"github.com/google/uuid"
)

// The bus contract's names. Every stream, bucket, consumer, subject and
// CloudEvent type a2abus uses is named here and nowhere else, so a worker in
// another language can be written from this file and schemas/jsonschema/.
const (
	// StreamWork holds work items, one subject per agent, work-queue retention.
	StreamWork = "A2A_WORK"
	// StreamEvents holds every task's status/artifact/message events, one
	// subject per task, limits retention.
	StreamEvents = "A2A_EVENTS"
	// StreamDLQ keeps work that could not be processed, for inspection.
	StreamDLQ = "A2A_DLQ"
	// StreamIntake holds submitted work until it is the caller's turn:
	// one subject per caller and task (SubjectIntake), work-queue
	// retention. The holder of the dispatch lease moves each item to its
	// agent's work subject as the agent's workers ask for work, taking
	// callers in turn, so one caller's backlog does not queue every other
	// caller behind it. Writers queue work here; workers never read it.
	StreamIntake = "A2A_INTAKE"
	// StreamAudit is the audit record (AuditRecord): every call of an
	// audited trust level and every admin action, append-only (no
	// message deletes, no purges; only an admin user may change its
	// bounds), bounded by age and bytes, oldest dropped first. Subjects
	// SubjectAudit(kind).
	StreamAudit = "A2A_AUDIT"

	// BucketTasks holds TaskRecord snapshots keyed by task id; updates are
	// compare-and-swap on the revision.
	BucketTasks = "A2A_TASKS"
	// BucketAgents is the live registry of agents: AgentRegistration keyed by
	// agent name, refreshed by heartbeats; stale entries expire.
	BucketAgents = "A2A_AGENTS"
	// BucketCards caches discovered external agent cards.
	BucketCards = "A2A_CARDS"
	// BucketContexts records who a context id belongs to: ContextClaim
	// keyed by ContextKey(contextId), created by the task the server made
	// the context for, or by the first task that names a client-chosen
	// one, so another caller cannot attach tasks to it.
	BucketContexts = "A2A_CONTEXTS"
	// BucketLeases holds short leases on work that one process of the
	// system does at a time (the sweep of finished and orphaned tasks):
	// a key is created by the process that takes the lease and renewed
	// while it holds it; the bucket's TTL frees the lease of a process
	// that died.
	BucketLeases = "A2A_LEASES"
	// BucketPush holds push-notification configs.
	BucketPush = "A2A_PUSH"
	// BucketRegistry holds what admins set at run time, RegistryEntry by
	// agent name: remote agents to run, and maintenance.
	BucketRegistry = "A2A_REGISTRY"
	// BucketBudgets holds the budgets' counters (BudgetCount), one key per
	// budget and window (BudgetKey), changed only by compare-and-swap;
	// each write carries a message TTL that outlives its window.
	BucketBudgets = "A2A_BUDGETS"
	// StreamNotify holds the wake-ups of push senders: at most one message
	// per task (a2a.notify.<taskId>, work-queue retention, discard-new per
	// subject), published after a write of a task whose record is marked
	// push; the sender that takes it delivers the task's events after each
	// config's cursor. A wake-up refused because one is pending is not
	// lost: the pending one covers the write.
	StreamNotify = "A2A_NOTIFY"
	// ConsumerPush is the durable consumer of StreamNotify shared by every
	// push sender.
	ConsumerPush = "push"

	subjectWorkPrefix   = "a2a.work."
	subjectEventsPrefix = "a2a.events."
	subjectCancelPrefix = "a2a.cancel."
	subjectDLQPrefix    = "a2a.dlq."
	subjectNotifyPrefix = "a2a.notify."
	subjectRemotePrefix = "a2a.remote."
	subjectIntakePrefix = "a2a.intake."
	subjectAuditPrefix  = "a2a.audit."

	// SubjectWorkAll, SubjectEventsAll and SubjectDLQAll are the wildcard
	// subjects of the streams.
	SubjectWorkAll   = subjectWorkPrefix + ">"
	SubjectEventsAll = subjectEventsPrefix + ">"
	SubjectDLQAll    = subjectDLQPrefix + ">"
	SubjectNotifyAll = subjectNotifyPrefix + "*"
	SubjectIntakeAll = subjectIntakePrefix + ">"
	SubjectAuditAll  = subjectAuditPrefix + "*"
	// SubjectRemoteAll is the core-NATS (not stored) subject of push
	// notifications an edge received for remote agents' tasks.
	SubjectRemoteAll = subjectRemotePrefix + "*"
	// SubjectCancelAll is the core-NATS (not stored) subject on which cancel
	// notices for every agent travel.
	SubjectCancelAll = subjectCancelPrefix + ">"
)

// CloudEvent types. Versioned: an incompatible change of an event's data gets
// a new type, and the old one keeps its schema.
const (
	// TypeWorkExecute asks a worker of an agent to run a task; data WorkItem.
	TypeWorkExecute = "dev.a2abus.work.execute.v1"
	// TypeTaskStatus reports a status change; data TaskStatusUpdateEvent.
	TypeTaskStatus = "dev.a2abus.task.status.v1"
	// TypeTaskArtifact reports an artifact or chunk; data TaskArtifactUpdateEvent.
	TypeTaskArtifact = "dev.a2abus.task.artifact.v1"
	// TypeTaskMessage carries an agent's direct Message reply; data Message.
	TypeTaskMessage = "dev.a2abus.task.message.v1"
	// TypeTaskCancel tells workers to stop a task; data CancelNotice.
	TypeTaskCancel = "dev.a2abus.task.cancel.v1"
	// TypePushWake asks a push sender to deliver a task's undelivered
	// events; data PushWake.
	TypePushWake = "dev.a2abus.push.wake.v1"
)

// CloudEvent extension attributes a2abus sets.
const (
	// ExtSequence is the task's KV revision after the event was stored,
	// zero-padded so it sorts as a string (CloudEvents sequence extension).
	ExtSequence = "sequence"
	// ExtSequenceIndex orders the events of one write: when one revision
	// stores several events (an agent's WORKING and first artifact, say),
	// they carry the same sequence and indexes 1, 2, … after the first
	// (absent means 0). Readers order events by (sequence, index).
	ExtSequenceIndex = "sequenceindex"
	// ExtGeneration is the task's generation after the event (see
	// TaskRecord.Generation): what A2A 1.1 events carry as generation. It
	// is an attribute rather than a field of the data, which stays the
	// A2A 1.0 event every reader knows.
	ExtGeneration = "a2ageneration"
	// ExtTraceparent carries the W3C trace context of the originating request.
	ExtTraceparent = "traceparent"
	// ExtA2AVersion is the A2A protocol version of the originating request.
	ExtA2AVersion = "a2aversion"
)

var agentNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// ValidAgentName reports whether name can name an agent: lowercase letters,
// digits, '-' and '_', at most 63 characters, so it is safe as a NATS
// subject token, a consumer name and a URL path segment.
func ValidAgentName(name string) bool { return agentNameRE.MatchString(name) }

// ValidTaskID reports whether id has the form of a server-generated task id
// (a UUID). Client strings that fail this never reach a subject or key.
func ValidTaskID(id string) bool {
	if len(id) != 36 {
		return false
	}
	_, err := uuid.Parse(id)
	return err == nil
}

// NewID returns a new random id for tasks, contexts, messages and events.
func NewID() string { return uuid.NewString() }

// SubjectWork is the subject root of work items for agent: the agent's
// durable consumer takes SubjectWork(agent) and SubjectWorkTasks(agent).
func SubjectWork(agent string) string { return subjectWorkPrefix + agent }

// SubjectWorkTask is the subject of the work item of one task:
// a2a.work.<agent>.<taskId>. A subject per task lets anyone ask the work
// stream whether a task has work queued (see bus.RequeueOrphans); the
// stream holds a subject only while its work is queued or in progress.
func SubjectWorkTask(agent, taskID string) string { return subjectWorkPrefix + agent + "." + taskID }

// SubjectWorkTasks is the wildcard of every task's work subject of agent.
func SubjectWorkTasks(agent string) string { return subjectWorkPrefix + agent + ".*" }

// WorkEventID is the CloudEvent id (and Nats-Msg-Id) of the work item that
// submits a task at revision rev: whoever queues that work (the edge, a
// fan-out parent, a requeue of orphaned work) uses the same id, so
// JetStream keeps one copy.
func WorkEventID(taskID string, rev uint64) string { return fmt.Sprintf("work-%s-%d", taskID, rev) }

// SubjectEvents is the subject of a task's events.
func SubjectEvents(taskID string) string { return subjectEventsPrefix + taskID }

// SubjectCancel is the core-NATS subject of cancel notices for agent.
func SubjectCancel(agent string) string { return subjectCancelPrefix + agent }

// SubjectAudit is the subject of the audit records of kind (AuditCall,
// AuditAdmin).
func SubjectAudit(kind string) string { return subjectAuditPrefix + kind }

// SubjectDLQ is the subject of dead-lettered work of agent.
func SubjectDLQ(agent string) string { return subjectDLQPrefix + agent }

// The headers of the bus contract, besides NATS's own (Nats-Msg-Id,
// Nats-TTL, …) and CloudEvents' (ce-*). Every contract header name is
// declared in this file (TestHeaderNamesOnlyInNames).

// HeaderTaskIndex is the message header of every BucketTasks write that
// carries the record's TaskIndexEntry (JSON), so an index of the tasks
// can be kept from the headers alone (a headers-only consumer) without
// reading or decoding the records. A write without it (an older writer)
// is indexed from its record.
const HeaderTaskIndex = "A2A-Task-Index"

// HeaderTaskDeleted marks the message that replaces a deleted task's
// events on its SubjectEvents (a subject rollup with a short message TTL,
// so the subject is soon empty): it carries no event, and readers of the
// events stream skip it.
const HeaderTaskDeleted = "A2A-Task-Deleted"

// The headers of dead-lettered messages (SubjectDLQ, the push dead
// letters): why, whose, and where the message was.
const (
	HeaderDLQReason     = "A2abus-Dlq-Reason"
	HeaderDLQAgent      = "A2abus-Dlq-Agent"
	HeaderDLQStreamSeq  = "A2abus-Dlq-Stream-Seq"
	HeaderDLQPushConfig = "A2abus-Dlq-Push-Config"
)

// HeaderRetry marks a worker's refusal of a remote agent's notification
// (SubjectRemote) as one the sender should retry.
const HeaderRetry = "A2abus-Retry"

// HeaderA2AVersion is the HTTP header of the A2A protocol version a
// request speaks (A2A 1.0 §3.6); the query parameter of the same name is
// read where a client cannot set headers.
const HeaderA2AVersion = "A2A-Version"

// HeaderMCPOrigin carries an MCP client's address from the MCP bridge's
// HTTP handler to the A2A calls it makes for the client, inside one
// process: the bridge removes it from what arrives and never sends it
// out.
const HeaderMCPOrigin = "X-A2abus-Mcp-Origin"

// The HTTP headers of a push notification, besides Authorization (the
// config's authentication) and Content-Type (ContentTypeA2A).
const (
	// HeaderNotificationToken carries the config's token, as a2a-go sends
	// it; HeaderNotificationTokenX as the other official SDKs and A2A 0.3
	// do. Both are sent.
	HeaderNotificationToken  = "A2A-Notification-Token"
	HeaderNotificationTokenX = "X-A2A-Notification-Token"
	// HeaderNotificationSignature carries a JWT (compact JWS) the sender
	// signed: iss, aud (the webhook URL), iat, exp, jti (the event id),
	// taskId and bodySha256 (base64url SHA-256 of the body), verified
	// against the JWKS every edge serves at /.well-known/jwks.json.
	HeaderNotificationSignature = "A2A-Notification-Signature"
	// HeaderNotificationEventID is the id of the notification's event: the
	// same on every redelivery of it, what a receiver de-duplicates by.
	HeaderNotificationEventID = "A2A-Notification-Id"
	// HeaderNotificationTaskID is the task the notification is of.
	HeaderNotificationTaskID = "A2A-Task-Id"
)

// ContentTypeA2A is the media type of A2A JSON bodies (A2A 1.0 §4.3.3).
const ContentTypeA2A = "application/a2a+json"

// SubjectNotify is the subject of a task's push-sender wake-up.
func SubjectNotify(taskID string) string { return subjectNotifyPrefix + taskID }

// SubjectRemote is the core-NATS subject on which an edge hands a push
// notification it received for a remote agent's task (an external agent
// told it of its task) to the worker following that task: a request, the
// reply empty when the worker stored what it says, else why not.
func SubjectRemote(taskID string) string { return subjectRemotePrefix + taskID }

// MetaRemotePushToken is the task metadata key under which a remote
// agent in push mode keeps the hex SHA-256 of the token it gave the
// external agent for the task's notifications; the edge's webhook takes a
// notification only with that token. The token itself is never stored.
const MetaRemotePushToken = "a2abus.remote.pushTokenSha256"

// MetaSkill, in a message's metadata, names the skill (its id, as the
// agent's card lists it) the message calls: what a trust level's skill
// list admits (the edge's callSkill), and what the router kind routes by.
const MetaSkill = "a2abus.skill"

// SubjectDLQPush is the subject of a task's notifications given up on:
// a2a.dlq.push.<taskId>, four tokens, so no agent's a2a.dlq.<agent>.
func SubjectDLQPush(taskID string) string { return subjectDLQPrefix + "push." + taskID }

// TaskIDFromNotifySubject returns the task id of a wake-up subject.
func TaskIDFromNotifySubject(subject string) (string, bool) {
	id, ok := strings.CutPrefix(subject, subjectNotifyPrefix)
	return id, ok && id != ""
}

// TaskIDFromEventSubject returns the task id of an events subject.
func TaskIDFromEventSubject(subject string) (string, bool) {
	if len(subject) <= len(subjectEventsPrefix) || subject[:len(subjectEventsPrefix)] != subjectEventsPrefix {
		return "", false
	}
	return subject[len(subjectEventsPrefix):], true
}

// ConsumerWork is the durable pull consumer shared by all workers of agent.
func ConsumerWork(agent string) string { return "work-" + agent }

// AgentFromConsumerWork returns the agent of a ConsumerWork name.
func AgentFromConsumerWork(consumer string) (string, bool) {
	agent, ok := strings.CutPrefix(consumer, "work-")
	return agent, ok && ValidAgentName(agent)
}

// ConsumerIntake is the durable consumer of an agent's intake, which only
// the holder of the dispatch lease reads.
func ConsumerIntake(agent string) string { return "intake-" + agent }

// SubjectIntake is the subject of one task's submitted work while it
// waits for its caller's turn: a2a.intake.<agent>.<caller>.<taskId>,
// caller a CallerKey.
func SubjectIntake(agent, caller, taskID string) string {
	return subjectIntakePrefix + agent + "." + caller + "." + taskID
}

// SubjectIntakeAgent is the wildcard of every intake subject of agent.
func SubjectIntakeAgent(agent string) string { return subjectIntakePrefix + agent + ".>" }

// SubjectIntakeTask is the wildcard of a task's intake subject, whoever
// its caller.
func SubjectIntakeTask(agent, taskID string) string {
	return subjectIntakePrefix + agent + ".*." + taskID
}

// ParseIntakeSubject splits an intake subject into its agent, caller and
// task id.
func ParseIntakeSubject(subject string) (agent, caller, taskID string, ok bool) {
	rest, ok := strings.CutPrefix(subject, subjectIntakePrefix)
	if !ok {
		return "", "", "", false
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 || !ValidAgentName(parts[0]) || parts[1] == "" || !ValidTaskID(parts[2]) {
		return "", "", "", false
	}
	return parts[0], parts[1], parts[2], true
}

// CallerKey names a caller in intake subjects: the owner of a task in its
// tenant, and for the anonymous owner the origin it called from — the
// caller a backlog share and a rate are counted for. It is a digest, so
// no principal or address appears in a subject: 16 hex digits.
func CallerKey(tenant, owner, origin string) string {
	sum := sha256.Sum256([]byte(tenant + "\x00" + owner + "\x00" + origin))
	return hex.EncodeToString(sum[:8])
}

// Source returns a CloudEvent source for a component instance, e.g.
// urn:a2abus:worker:echo-1.
func Source(role, instance string) string { return fmt.Sprintf("urn:a2abus:%s:%s", role, instance) }

// SequenceString formats a task revision as the CloudEvents sequence value.
func SequenceString(rev uint64) string { return fmt.Sprintf("%020d", rev) }

// BudgetKey is the key of one window's counter of a budget in
// BucketBudgets: <kind>.<scope>.<id digest>.<period seconds>.<window
// start, Unix seconds>. The id (a principal or tenant name, any string) is
// the first 16 bytes of its SHA-256 in hex, since KV keys take few
// characters; the value names it for whoever reads the bucket.
func BudgetKey(kind, scope, id string, period, start int64) string {
	sum := sha256.Sum256([]byte(id))
	return fmt.Sprintf("%s.%s.%s.%d.%d", kind, scope, hex.EncodeToString(sum[:16]), period, start)
}

// ContextKey is the key of a context id in BucketContexts: the hex SHA-256
// of the id, since a client may choose any string and KV keys take few
// characters.
func ContextKey(contextID string) string {
	sum := sha256.Sum256([]byte(contextID))
	return hex.EncodeToString(sum[:])
}
