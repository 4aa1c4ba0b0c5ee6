//go:build unix

package workers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/a2abus/a2abus/schemas"
)

// ExecConfig configures an exec agent: one command run per task.
type ExecConfig struct {
	// Command is the program to run (looked up in PATH). Required.
	Command string `json:"command"`
	// Args are its arguments.
	Args []string `json:"args,omitempty"`
	// Env adds KEY=VALUE entries to the worker's environment.
	Env []string `json:"env,omitempty"`
	// BaseEnv is the worker's environment, which the command starts from
	// (cmd gives its own: workers read no environment themselves); nil:
	// the command gets Env and the task's variables only.
	BaseEnv []string `json:"-"`
	// Dir is the working directory; default the worker's.
	Dir string `json:"dir,omitempty"`
	// Timeout bounds one run; default 5m. JSON: a duration string ("30s").
	Timeout schemas.Duration `json:"timeout,omitempty"`
	// Description goes on the agent card.
	Description string `json:"description,omitempty"`
}

const (
	execStderrTail = 2 << 10  // bytes of stderr kept for the failure message
	execChunkBytes = 32 << 10 // most bytes of stdout in one artifact chunk
	execFlushEvery = 100 * time.Millisecond
	execKillGrace  = 2 * time.Second
)

// ExecDefinition returns an agent that runs cfg's command for every task.
//
// The message text goes to the command's stdin. Its stdout becomes one text
// artifact, streamed in chunks as the command writes (lines gathered for up
// to 100 ms or 32 KiB per chunk). Lines that are JSON objects with an
// "a2abus" member are events instead of text (the line protocol, see
// schemas/jsonschema/exec-line.schema.json):
//
//	{"a2abus":"status","text":"halfway there"}          progress (WORKING)
//	{"a2abus":"artifact","artifactId":"r","name":"report","text":"...","append":false,"lastChunk":true}
//	{"a2abus":"artifact","artifactId":"d","data":{"rows":3}}
//	{"a2abus":"input-required","text":"Which file?"}     ask the client; the run ends
//	{"a2abus":"complete","text":"done"} / {"a2abus":"fail","text":"why"} / {"a2abus":"reject","text":"why"}
//
// Exit status 0 completes the task; any other fails it with the exit status
// and the tail of stderr. Canceling the task, the per-task timeout and
// worker shutdown kill the command's whole process group. The command sees
// A2ABUS_TASK_ID, A2ABUS_CONTEXT_ID, A2ABUS_ATTEMPT and A2ABUS_TRUST_LEVEL
// (the trust level of the call that created the task) in its environment.
func ExecDefinition(name string, cfg ExecConfig) (Definition, error) {
	if strings.TrimSpace(cfg.Command) == "" {
		return Definition{}, errors.New("exec: command is required")
	}
	look := cfg.Command
	if strings.Contains(look, "/") && !filepath.IsAbs(look) && cfg.Dir != "" {
		look = filepath.Join(cfg.Dir, look) // it runs from Dir
	}
	if _, err := exec.LookPath(look); err != nil {
		return Definition{}, fmt.Errorf("exec: command %q: %w", cfg.Command, err)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = schemas.Duration(5 * time.Minute)
	}
	desc := cfg.Description
	if desc == "" {
		desc = "Runs `" + strings.Join(append([]string{cfg.Command}, cfg.Args...), " ") + "` for each task: your message on stdin, its output streamed back."
	}
	return Definition{
		Name: name,
		Card: schemas.AgentCard{
			Name: name, Description: desc, Version: "1.0.0",
			Skills: []schemas.AgentSkill{{ID: "exec", Name: cfg.Command, Description: desc, Tags: []string{"exec", "command"}}},
		},
		Agent: &execAgent{cfg: cfg},
	}, nil
}

type execAgent struct{ cfg ExecConfig }

// execLine is one JSON line of the exec line protocol.
type execLine struct {
	Event       string          `json:"a2abus"`
	Text        string          `json:"text,omitempty"`
	Data        json.RawMessage `json:"data,omitempty"`
	ArtifactID  string          `json:"artifactId,omitempty"`
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	MediaType   string          `json:"mediaType,omitempty"`
	Append      bool            `json:"append,omitempty"`
	LastChunk   bool            `json:"lastChunk,omitempty"`
}

// Execute runs the command once for this turn of the task.
func (a *execAgent) Execute(ctx context.Context, req *Request, out *Emitter) error {
	timeout := time.Duration(a.cfg.Timeout)
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	cmd := exec.Command(a.cfg.Command, a.cfg.Args...)
	cmd.Dir = a.cfg.Dir
	cmd.Env = append(slices.Clip(a.cfg.BaseEnv), a.cfg.Env...)
	cmd.Env = append(cmd.Env, "A2ABUS_TASK_ID="+req.Task.ID, "A2ABUS_CONTEXT_ID="+req.Task.ContextID, "A2ABUS_ATTEMPT="+strconv.FormatUint(req.Attempt, 10),
		"A2ABUS_TRUST_LEVEL="+req.Trust)
	cmd.Stdin = strings.NewReader(req.Message.Text())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr := &tailBuffer{max: execStderrTail}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", a.cfg.Command, err)
	}
	// The process group dies when the run's context ends, whatever the
	// reason (cancel, timeout, shutdown); Wait reaps the leader.
	killed := make(chan struct{})
	stopKiller := context.AfterFunc(runCtx, func() {
		defer close(killed)
		killGroup(cmd.Process.Pid)
	})

	s := &execStream{out: out, taskID: req.Task.ID}
	streamErr := s.pump(runCtx, stdout)
	if streamErr != nil {
		cancel() // the events cannot be delivered: stop the command
	}
	waitErr := cmd.Wait()
	if !stopKiller() {
		<-killed
	} else {
		// The leader is gone; make sure nothing it started lingers.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}

	switch {
	case ctx.Err() != nil:
		return ctx.Err() // canceled or shutting down: the runtime decides
	case errors.Is(runCtx.Err(), context.DeadlineExceeded):
		// Keep what the command wrote, closing the artifact, then fail.
		if err := s.flush(ctx, true); err != nil {
			return err
		}
		return out.Fail(ctx, fmt.Sprintf("%s timed out after %s%s", a.cfg.Command, timeout, stderr.suffix()))
	case streamErr != nil:
		return streamErr
	case s.ended:
		return nil // the command ended or interrupted the task itself
	}
	if err := s.flush(ctx, true); err != nil {
		return err
	}
	if waitErr != nil {
		code := -1
		var ee *exec.ExitError
		if errors.As(waitErr, &ee) {
			code = ee.ExitCode()
		}
		return out.Fail(ctx, fmt.Sprintf("%s exited with status %d%s", a.cfg.Command, code, stderr.suffix()))
	}
	return nil
}

// killGroup stops a process group: SIGTERM now, SIGKILL after a grace for
// whatever ignored it.
func killGroup(pid int) {
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	time.AfterFunc(execKillGrace, func() {
		if syscall.Kill(-pid, 0) == nil { // still there after the grace
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	})
}

// execStream turns the command's stdout into events. Text goes out as soon
// as a chunk is gathered; when the output ends, a last chunk (empty if need
// be) carries lastChunk, so a reader knows the artifact is whole.
type execStream struct {
	out     *Emitter
	taskID  string
	pending bytes.Buffer // text not yet sent
	sent    bool         // a stdout chunk went out already (next ones append)
	ended   bool         // the command ended or interrupted the task
}

func (s *execStream) pump(ctx context.Context, r io.Reader) error {
	lines := make(chan string, 64)
	readErr := make(chan error, 1)
	go func() {
		br := bufio.NewReaderSize(r, 64<<10)
		for {
			// A line longer than the buffer arrives in pieces, as text.
			b, err := br.ReadSlice('\n')
			if len(b) > 0 {
				lines <- string(b)
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if err != nil {
				close(lines)
				if errors.Is(err, io.EOF) {
					err = nil
				}
				readErr <- err
				return
			}
		}
	}()
	tick := time.NewTicker(execFlushEvery)
	defer tick.Stop()
	// On any early return, let the reader goroutine finish: drain what it
	// still sends until the pipe closes.
	drain := func() {
		go func() {
			for range lines {
			}
		}()
	}
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				return <-readErr
			}
			if err := s.line(ctx, line); err != nil {
				drain()
				return err
			}
		case <-tick.C:
			if err := s.flush(ctx, false); err != nil {
				drain()
				return err
			}
		case <-ctx.Done():
			// The run is over (cancel, timeout): a descendant that left the
			// process group may still hold stdout open; stop reading it.
			if c, ok := r.(io.Closer); ok {
				_ = c.Close()
			}
			drain()
			return nil
		}
	}
}

func (s *execStream) line(ctx context.Context, line string) error {
	if s.ended {
		return nil // after the command ended the task, output is ignored
	}
	trimmed := strings.TrimSpace(line)
	if strings.HasPrefix(trimmed, "{") && strings.Contains(trimmed, `"a2abus"`) {
		var l execLine
		if json.Unmarshal([]byte(trimmed), &l) == nil && l.Event != "" {
			if err := s.flush(ctx, true); err != nil {
				return err
			}
			return s.event(ctx, &l)
		}
	}
	s.pending.WriteString(line)
	if s.pending.Len() >= execChunkBytes {
		return s.flush(ctx, false)
	}
	return nil
}

// flush sends pending text as a chunk; with last it also closes the
// artifact (a stdout that was never written has no artifact).
func (s *execStream) flush(ctx context.Context, last bool) error {
	if s.pending.Len() == 0 && !(last && s.sent) {
		return nil
	}
	text := s.pending.String()
	s.pending.Reset()
	return s.sendChunk(ctx, text, last)
}

func (s *execStream) sendChunk(ctx context.Context, text string, last bool) error {
	a := schemas.Artifact{ArtifactID: "stdout-" + s.taskID, Name: "stdout", Parts: []schemas.Part{schemas.TextPart(text)}}
	err := s.out.ArtifactChunk(ctx, a, s.sent, last)
	s.sent = true
	return err
}

func (s *execStream) event(ctx context.Context, l *execLine) error {
	switch l.Event {
	case "status":
		return s.out.Working(ctx, l.Text)
	case "artifact":
		var p schemas.Part
		switch {
		case len(l.Data) > 0:
			p = schemas.Part{Data: l.Data, MediaType: "application/json"}
		default:
			p = schemas.TextPart(l.Text)
		}
		if l.MediaType != "" {
			p.MediaType = l.MediaType
		}
		a := schemas.Artifact{ArtifactID: l.ArtifactID, Name: l.Name, Description: l.Description, Parts: []schemas.Part{p}}
		if a.ArtifactID == "" {
			a.ArtifactID = "artifact-" + s.taskID
		}
		return s.out.ArtifactChunk(ctx, a, l.Append, l.LastChunk || !l.Append)
	case "input-required":
		s.ended = true
		return s.out.InputRequired(ctx, l.Text)
	case "auth-required":
		s.ended = true
		return s.out.AuthRequired(ctx, l.Text)
	case "complete":
		s.ended = true
		return s.out.Complete(ctx, l.Text)
	case "fail":
		s.ended = true
		return s.out.Fail(ctx, l.Text)
	case "reject":
		s.ended = true
		return s.out.Reject(ctx, l.Text)
	}
	// An unknown event is not lost: it is passed on as text.
	s.pending.WriteString(fmt.Sprintf("{\"a2abus\":%q,\"text\":%q}\n", l.Event, l.Text))
	return nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

// suffix is ": <stderr tail>" or "" when stderr was empty.
func (t *tailBuffer) suffix() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(string(t.buf))
	if s == "" {
		return ""
	}
	return ": " + s
}
