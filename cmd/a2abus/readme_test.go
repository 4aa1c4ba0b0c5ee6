//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// This file owns the README's promise that its shell examples work as
// written: TestReadmeExamples runs every one of them that needs only a
// running serve and the binary, against one fresh serve, and says which it
// did not run and why. The README is parsed, not copied: a new example is
// picked up, and a changed one that no longer does what the README says
// fails with the command, its output and what was expected.

// readmeExpect is what the README says next to an example: every command of
// section whose text (as the README writes it) contains cmd must print each
// of out (stdout and stderr together; {TASK_ID} is the task id the command
// was given, or else the last one an earlier example printed) and exit with
// exit. A command no entry names must exit 0 (and a curl must not answer a
// JSON-RPC error). An entry that names no command that ran fails the test:
// the README changed under it.
var readmeExpect = []struct {
	section, cmd string
	out          []string
	exit         int
}{
	// "The result is {"task": {...}} with state TASK_STATE_COMPLETED, the
	// echoed text as an artifact and the conversation in history."
	{"Talk to it", "hello from curl", []string{`{"task":{"id":"`, `"state":"TASK_STATE_COMPLETED"`, `"artifacts":[{`, `"history":[{`}, 0},
	// "to get the task back at once and poll it with GetTask"
	{"Talk to it", `"returnImmediately":true`, []string{`{"task":{"id":"`}, 0},
	{"Talk to it", `"method":"GetTask"`, []string{`"result":{"id":"{TASK_ID}"`}, 0},
	// "The task completes with wc's output, 3, as its artifact."
	{"Agents", "/agents/wc", []string{`"state":"TASK_STATE_COMPLETED"`, `"text":"3\n"`}, 0},
	{"The client", `"hello" --stream`, []string{"status TASK_STATE_WORKING", "status TASK_STATE_COMPLETED"}, 0},
	{"The client", `"/ask"`, []string{"TASK_STATE_INPUT_REQUIRED"}, 0},
	{"The client", "a2abus subscribe", []string{"task {TASK_ID}  TASK_STATE_INPUT_REQUIRED", "status TASK_STATE_COMPLETED"}, 0},
	{"The client", "--task TASK_ID", []string{"task {TASK_ID}  TASK_STATE_COMPLETED", "artifact echo: answer"}, 0},
	{"The client", "a2abus get", []string{"task {TASK_ID}  TASK_STATE_COMPLETED"}, 0},
	{"The client", "a2abus cancel", []string{"task {TASK_ID}  TASK_STATE_CANCELED"}, 0},
	{"The client", "a2abus tasks", []string{"TASK_STATE_COMPLETED", " task(s)"}, 0},
	{"The client", "a2abus agents", []string{"echo (local)"}, 0},
	{"The client", "/agents/wc", []string{"task "}, 0},
	// The webhook's lines shown under the example.
	{"Push notifications", "a2abus webhook", []string{"  status WORKING", "  artifact echo-", "  status COMPLETED: echoed 5 characters"}, 0},
}

// readmeAddr is where the README's serve listens; the test's serve stands
// in for it on a free port.
const readmeAddr = "127.0.0.1:8080"

// readmeBlock is one fenced code block of the README.
type readmeBlock struct {
	section string // the "## " heading it is under
	line    int    // README line of its first line of code
	lang    string
	text    string
	json    *readmeBlock // the json block right before it (only blank lines between), if any
}

// readmeCmd is one command of a shell block, as the README writes it.
type readmeCmd struct {
	block      *readmeBlock
	line       int
	text       string     // continuation lines included, the trailing comment and a final & not
	background bool       // it ended with &
	segs       [][]string // the words of each simple command (split at && || ; |)
	vars       []string   // $NAME it refers to outside single quotes
	subst      bool       // it runs a command substitution, $(...) or `...`
}

func (c *readmeCmd) where() string {
	return fmt.Sprintf("README.md:%d (%s)", c.line, c.block.section)
}

// readmeBlocks reads the fenced code blocks of the README at path.
func readmeBlocks(t *testing.T, path string) []*readmeBlock {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []*readmeBlock
	var cur *readmeBlock
	var body []string
	section := ""
	var last *readmeBlock // the last block closed, while only blank lines follow it
	for i, l := range strings.Split(string(raw), "\n") {
		switch {
		case cur == nil && strings.HasPrefix(l, "```"):
			cur = &readmeBlock{section: section, line: i + 2, lang: strings.TrimSpace(strings.TrimPrefix(l, "```"))}
			if last != nil && last.lang == "json" {
				cur.json = last
			}
			body = nil
		case cur != nil && strings.TrimSpace(l) == "```":
			cur.text = strings.Join(body, "\n")
			blocks = append(blocks, cur)
			last, cur = cur, nil
		case cur != nil:
			body = append(body, l)
		default:
			if strings.HasPrefix(l, "## ") {
				section = strings.TrimSpace(strings.TrimPrefix(l, "## "))
			}
			if strings.TrimSpace(l) != "" {
				last = nil
			}
		}
	}
	if cur != nil {
		t.Fatalf("README.md: the code block at line %d is not closed", cur.line-1)
	}
	return blocks
}

// splitShell splits a shell block into its commands, the way sh reads
// them: quotes (which may span lines), backslash-newline continuations,
// comments, and &&, ||, ;, | and a final & between simple commands.
func splitShell(b *readmeBlock) []*readmeCmd {
	var cmds []*readmeCmd
	s, line := b.text, b.line
	cur := &readmeCmd{block: b}
	var raw, word strings.Builder
	var seg []string
	inWord := false
	flushWord := func() {
		if inWord {
			seg = append(seg, word.String())
			word.Reset()
			inWord = false
		}
	}
	flushSeg := func() {
		flushWord()
		if len(seg) > 0 {
			cur.segs = append(cur.segs, seg)
			seg = nil
		}
	}
	end := func() {
		flushSeg()
		if len(cur.segs) > 0 {
			cur.text = strings.TrimSpace(raw.String())
			cmds = append(cmds, cur)
		}
		cur = &readmeCmd{block: b}
		raw.Reset()
	}
	// dollar notes a $ reference at s[i] (outside single quotes).
	dollar := func(i int) {
		if i+1 >= len(s) {
			return
		}
		switch n := s[i+1]; {
		case n == '(':
			cur.subst = true
		case n == '{' || n == '_' || n >= 'A' && n <= 'Z' || n >= 'a' && n <= 'z':
			j := i + 1
			if n == '{' {
				j++
			}
			k := j
			for k < len(s) && (s[k] == '_' || s[k] >= 'A' && s[k] <= 'Z' || s[k] >= 'a' && s[k] <= 'z' || s[k] >= '0' && s[k] <= '9') {
				k++
			}
			cur.vars = append(cur.vars, s[j:k])
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if strings.TrimSpace(raw.String()) == "" && c != ' ' && c != '\t' && c != '\n' {
			cur.line = line
		}
		switch {
		case c == '\n':
			line++
			end()
		case c == ' ' || c == '\t':
			flushWord()
			raw.WriteByte(c)
		case c == '#' && !inWord:
			for i+1 < len(s) && s[i+1] != '\n' {
				i++
			}
		case c == '\\' && i+1 < len(s):
			raw.WriteByte(c)
			raw.WriteByte(s[i+1])
			if s[i+1] == '\n' {
				line++
			} else {
				word.WriteByte(s[i+1])
				inWord = true
			}
			i++
		case c == '\'':
			inWord = true
			raw.WriteByte(c)
			for i++; i < len(s) && s[i] != '\''; i++ {
				if s[i] == '\n' {
					line++
				}
				raw.WriteByte(s[i])
				word.WriteByte(s[i])
			}
			raw.WriteByte('\'')
		case c == '"':
			inWord = true
			raw.WriteByte(c)
			for i++; i < len(s) && s[i] != '"'; i++ {
				switch {
				case s[i] == '\n':
					line++
				case s[i] == '$':
					dollar(i)
				case s[i] == '`':
					cur.subst = true
				case s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0:
					raw.WriteByte(s[i])
					i++
				}
				raw.WriteByte(s[i])
				word.WriteByte(s[i])
			}
			raw.WriteByte('"')
		case c == '&' && i+1 < len(s) && s[i+1] == '&', c == '|' && i+1 < len(s) && s[i+1] == '|':
			flushSeg()
			raw.WriteString(s[i : i+2])
			i++
		case c == '&':
			flushSeg()
			cur.background = true
			end()
		case c == ';' || c == '|':
			flushSeg()
			raw.WriteByte(c)
		default:
			if c == '$' {
				dollar(i)
			}
			if c == '`' {
				cur.subst = true
			}
			raw.WriteByte(c)
			word.WriteByte(c)
			inWord = true
		}
	}
	end()
	return cmds
}

// program returns a simple command's program and arguments after its
// leading NAME=value assignments, with the README's ways of running the
// binary (a2abus, ./a2abus, go run ./cmd/a2abus) all read as "a2abus".
func program(seg []string) (string, []string) {
	i := 0
	for i < len(seg) && readmeAssign.MatchString(seg[i]) {
		i++
	}
	if i == len(seg) {
		return "", nil
	}
	prog, args := seg[i], seg[i+1:]
	if prog == "go" && len(args) >= 2 && args[0] == "run" && (args[1] == "./cmd/a2abus" || strings.HasSuffix(args[1], "/a2abus/cmd/a2abus")) {
		return "a2abus", args[2:]
	}
	if filepath.Base(prog) == "a2abus" {
		return "a2abus", args
	}
	return prog, args
}

// readmeAssign matches a NAME=value word.
var readmeAssign = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// readmeFileArg matches an argument that names a file.
var readmeFileArg = regexp.MustCompile(`^(/|\./|\.\./|~|@)|\.(json|pem|key|crt|creds)$`)

// readmeBinary matches the README's other ways of running the binary.
var readmeBinary = regexp.MustCompile(`(^|[\s;&|])(go run \./cmd/a2abus|\./a2abus)\s`)

// readmeURL matches the hosts of the URLs a command reaches.
var readmeURL = regexp.MustCompile(`https?://([^/\s'"\\]+)`)

// readmeLoopback matches a loopback address with a port, which the test
// moves: the README's serve to the test's, any other to a free port.
var readmeLoopback = regexp.MustCompile(`127\.0\.0\.1:([0-9]+)`)

// readmePlaceholder matches where a command wants a task id an earlier
// example printed ($TASK_ID, a shell variable, is not one).
var readmePlaceholder = regexp.MustCompile(`\$?\{?TASK_ID\}?|<task[ _-]?id>`)

// readmeTaskID matches a task id in an example's output: the first word
// of a2abus's task lines, the id of a JSON-RPC task result.
var readmeTaskID = regexp.MustCompile(`(?m)(?:^task |^|"task":\{"id":"|"result":\{"id":")([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})`)

// backgroundServers are a2abus commands that run until stopped, which an
// example may start with & for the commands after it.
var backgroundServers = map[string]bool{"webhook": true}

// classify says whether the test runs c: "run", "serve" (the test's own
// serve stands for it) or "skip" with the reason.
func classify(c *readmeCmd, dir string) (kind, reason string) {
	for _, seg := range c.segs {
		prog, args := program(seg)
		switch {
		case prog == "a2abus" && len(args) > 0 && args[0] == "serve" && len(c.segs) == 1:
			return "serve", ""
		case prog == "curl":
		case prog == "a2abus" && len(args) > 0 && args[0] == "load":
			return "skip", "a2abus load measures for seconds; the load tests run it"
		case prog == "a2abus" && len(args) > 0 && backgroundServers[args[0]]:
			if !c.background {
				return "skip", fmt.Sprintf("a2abus %s runs until stopped (started with & it runs for the commands after it)", args[0])
			}
		case prog == "a2abus" && len(args) > 0 && clientCommands[args[0]] > 0:
		case prog == "a2abus" && len(args) > 0:
			return "skip", fmt.Sprintf("a2abus %s is not a client command: it starts a process of its own or writes files", args[0])
		case prog == "":
			return "skip", "sets a shell variable, which the test's commands (each its own sh) do not share"
		case prog == "go" && len(args) > 0:
			return "skip", fmt.Sprintf("go %s: not an example of a running serve (the test uses its own build)", args[0])
		default:
			return "skip", fmt.Sprintf("runs %s, not curl or the a2abus binary", prog)
		}
		// A flag's value that names a file (a positional argument is
		// text: "/ask" is a message).
		for i, a := range args {
			if _, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(a, "-") {
				a = v
			} else if i == 0 || !strings.HasPrefix(args[i-1], "-") {
				continue
			}
			if strings.Contains(a, "://") || !readmeFileArg.MatchString(a) {
				continue
			}
			if _, err := os.Stat(filepath.Join(dir, strings.TrimPrefix(a, "@"))); err != nil {
				return "skip", fmt.Sprintf("needs the file %s, which the README does not make for it", a)
			}
		}
	}
	for _, m := range readmeURL.FindAllStringSubmatch(c.text, -1) {
		if h, _, _ := strings.Cut(m[1], ":"); h != "127.0.0.1" {
			return "skip", fmt.Sprintf("reaches %s, not the README's serve (%s)", m[1], readmeAddr)
		}
	}
	if len(c.vars) > 0 {
		return "skip", fmt.Sprintf("needs $%s, which the README does not set for it", c.vars[0])
	}
	if c.subst {
		return "skip", "runs a command substitution, which may need other tools"
	}
	for _, seg := range c.segs {
		for _, w := range seg {
			if strings.Contains(w, "=...") {
				return "skip", fmt.Sprintf("%s is a placeholder", w)
			}
		}
	}
	return "run", ""
}

// A sample of the README: its quotes, continuations, comments and
// operators split as sh splits them.
func TestReadmeSplitShell(t *testing.T) {
	b := &readmeBlock{section: "s", line: 10, lang: "sh", text: "curl -s http://h/ \\\n  -d '{\"a\":\n  1}'   # a comment\n" +
		"# only a comment\nA=1 a2abus send \"x y\" --task TASK_ID &   # bg\ngo test ./... && edge/interop/run.sh\necho \"$HOME\" $(date)"}
	cmds := splitShell(b)
	if len(cmds) != 4 {
		t.Fatalf("got %d commands, want 4: %+v", len(cmds), cmds)
	}
	if c := cmds[0]; c.line != 10 || !slices.Equal(c.segs[0], []string{"curl", "-s", "http://h/", "-d", "{\"a\":\n  1}"}) || strings.Contains(c.text, "comment") {
		t.Errorf("curl: line %d, words %q, text %q", c.line, c.segs, c.text)
	}
	if c := cmds[1]; c.line != 14 || !c.background || !slices.Equal(c.segs[0], []string{"A=1", "a2abus", "send", "x y", "--task", "TASK_ID"}) || strings.HasSuffix(c.text, "&") {
		t.Errorf("background: line %d, %v, words %q, text %q", c.line, c.background, c.segs, c.text)
	}
	if c := cmds[2]; len(c.segs) != 2 || c.segs[1][0] != "edge/interop/run.sh" {
		t.Errorf("&&: %q", c.segs)
	}
	if c := cmds[3]; !slices.Equal(c.vars, []string{"HOME"}) || !c.subst {
		t.Errorf("vars %q, substitution %v", c.vars, c.subst)
	}
}

// readmeRun is one command the test started, with what it printed.
type readmeRun struct {
	c      *readmeCmd
	text   string // as run: addresses moved, placeholders filled
	taskID string // the id a placeholder takes: the last an earlier example printed
	p      *proc
}

// shellCommand runs text with sh in dir, in its own process group so that
// ending it ends whatever it started.
func shellCommand(ctx context.Context, dir string, env []string, text string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "sh", "-c", text)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// TestReadmeExamples runs the README's shell examples that need only a
// running serve and the binary — curl commands and a2abus client commands
// — in README order against one fresh serve, which the test starts with
// every flag the README's serve lines give (its config file being the json
// block right before the line) on a free port. A TASK_ID or <task id> is
// the id of the task an earlier example printed last. A command started
// with & runs on once it has printed its first line, and must end (or, for
// a receiver like a2abus webhook, have printed what is expected) by the
// end of its block. Every other command is logged with why it is not run.
func TestReadmeExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	blocks := readmeBlocks(t, "../../README.md")
	work := t.TempDir()

	// a2abus, on the PATH of every example, is this test binary as main.
	bin, err := filepath.Abs(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	binDir := filepath.Join(work, "bin")
	if err := os.Mkdir(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	wrapper := "#!/bin/sh\nA2ABUS_TEST_MAIN=1 exec '" + strings.ReplaceAll(bin, "'", `'\''`) + "' \"$@\"\n"
	if err := os.WriteFile(filepath.Join(binDir, "a2abus"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	// Under the race detector a process waits a second at exit for late
	// reports; the examples' processes skip that wait (their races are
	// still reported as they happen), or it would be most of the test.
	race := "atexit_sleep_ms=0"
	var env []string
	for _, kv := range os.Environ() {
		name, val, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(name, "A2ABUS_") || strings.HasPrefix(name, "A2A_") || name == "NATS_URL" || name == "NATS_CREDS":
			continue // the examples see only what the README sets
		case name == "PATH":
			kv = "PATH=" + binDir + string(os.PathListSeparator) + val
		case name == "GORACE":
			race = val + " " + race
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "GORACE="+race)

	type classified struct {
		c            *readmeCmd
		kind, reason string
	}
	var all []classified
	serveFlags := map[string]string{}
	var serveOrder []string
	for _, b := range blocks {
		if b.lang != "sh" && b.lang != "bash" && b.lang != "shell" {
			continue
		}
		prevSkipped := false
		for _, c := range splitShell(b) {
			kind, reason := classify(c, work)
			if kind == "run" && prevSkipped {
				kind, reason = "skip", "follows a skipped command of its block, which it may depend on"
			}
			prevSkipped = kind == "skip"
			all = append(all, classified{c, kind, reason})
			if kind != "serve" {
				continue
			}
			// The test's serve takes this line's flags; a config file it
			// names is the json block right before its block.
			_, args := program(c.segs[0])
			for i := 1; i < len(args); i++ {
				name, val, ok := strings.Cut(args[i], "=")
				if !strings.HasPrefix(name, "--") {
					t.Fatalf("%s: serve's argument %q is not a flag", c.where(), args[i])
				}
				if !ok {
					val = "true"
					if i+1 < len(args) && !strings.HasPrefix(args[i+1], "--") {
						val = args[i+1]
						i++
					}
				}
				switch name {
				case "--listen", "--data-dir", "--nats-listen":
					continue // the test's own
				case "--config":
					if b.json == nil {
						t.Fatalf("%s: serve --config %s, but no json block right before it shows that file", c.where(), val)
					}
					file := filepath.Join(work, val)
					if err := os.WriteFile(file, []byte(b.json.text), 0o644); err != nil {
						t.Fatal(err)
					}
					val = file
				}
				if old, seen := serveFlags[name]; seen && old != val {
					t.Fatalf("%s: serve %s %s, but an earlier serve line of the README gives %s; one serve cannot run both", c.where(), name, val, old)
				}
				if _, seen := serveFlags[name]; !seen {
					serveOrder = append(serveOrder, name)
				}
				serveFlags[name] = val
			}
		}
	}

	addr := freeAddr(t)
	base := "http://" + addr
	args := []string{"serve", "--listen", addr, "--data-dir", filepath.Join(work, "data"), "--nats-listen", "off"}
	for _, name := range serveOrder {
		args = append(args, name, serveFlags[name])
	}
	t.Logf("the README's serve: a2abus %s", strings.Join(args, " "))
	start := time.Now()
	serve := startProc(t, args...)
	waitReady(t, serve, base)
	t.Logf("ready in %v", time.Since(start).Round(time.Millisecond))

	// moved maps each loopback address of the README to the test's.
	moved := map[string]string{readmeAddr: addr}
	move := func(s string) string {
		return readmeLoopback.ReplaceAllStringFunc(s, func(a string) string {
			if _, ok := moved[a]; !ok {
				moved[a] = freeAddr(t)
			}
			return moved[a]
		})
	}
	matched := make([]bool, len(readmeExpect))
	expectFor := func(r *readmeRun) (out []string, exit int) {
		for i, e := range readmeExpect {
			if e.section == r.c.block.section && strings.Contains(r.c.text, e.cmd) {
				matched[i] = true
				out, exit = append(out, e.out...), e.exit
			}
		}
		for i := range out {
			out[i] = strings.ReplaceAll(out[i], "{TASK_ID}", r.taskID)
		}
		return out, exit
	}
	// check reports a command that did not do what the README says.
	check := func(r *readmeRun, code int, runErr error) {
		t.Helper()
		out := r.p.output()
		want, exit := expectFor(r)
		var missing []string
		for _, w := range want {
			if !strings.Contains(out, w) {
				missing = append(missing, w)
			}
		}
		var wrong []string
		if runErr != nil {
			wrong = append(wrong, "it did not run to its end: "+runErr.Error())
		}
		if code != exit {
			wrong = append(wrong, fmt.Sprintf("it exited %d, the README says %d", code, exit))
		}
		if len(missing) > 0 {
			wrong = append(wrong, fmt.Sprintf("its output lacks %q", missing))
		}
		if strings.HasPrefix(r.text, "curl") && strings.Contains(out, `"error":{`) {
			wrong = append(wrong, "it was answered a JSON-RPC error")
		}
		if len(wrong) > 0 {
			t.Errorf("%s does not do what the README says: %s\ncommand (as run):\n%s\noutput:\n%s",
				r.c.where(), strings.Join(wrong, "; "), r.text, out)
		}
	}

	lastID := ""
	var ran, ranCurl, ranBinary int
	var bg []*readmeRun
	// endBlock waits for the block's background commands: a client must
	// end by itself, a receiver must have printed what is expected.
	endBlock := func() {
		for _, r := range bg {
			want, _ := expectFor(r)
			_, args := program(r.c.segs[0])
			server := len(args) > 0 && backgroundServers[args[0]]
			deadline := time.After(20 * time.Second)
		wait:
			for {
				select {
				case err := <-r.p.done:
					r.p.done <- err
					break wait
				case <-deadline:
					break wait
				case <-time.After(20 * time.Millisecond): // polling an external process's output
					if server && containsAll(r.p.output(), want) {
						break wait
					}
				}
			}
			if server {
				_ = syscall.Kill(-r.p.cmd.Process.Pid, syscall.SIGKILL)
				err := <-r.p.done
				r.p.done <- err
				check(r, 0, nil)
				continue
			}
			select {
			case err := <-r.p.done:
				r.p.done <- err
				check(r, r.p.cmd.ProcessState.ExitCode(), notExit(err))
			default:
				_ = syscall.Kill(-r.p.cmd.Process.Pid, syscall.SIGKILL)
				t.Errorf("%s started with & did not end by the end of its block\ncommand (as run):\n%s\noutput:\n%s", r.c.where(), r.text, r.p.output())
			}
		}
		bg = nil
	}
	var block *readmeBlock
	for _, cl := range all {
		c := cl.c
		if c.block != block {
			endBlock()
			block = c.block
		}
		switch cl.kind {
		case "serve":
			t.Logf("SERVE %s: %s  (the test's serve, above)", c.where(), c.text)
			continue
		case "skip":
			t.Logf("SKIP  %s: %s  (%s)", c.where(), oneLine(c.text), cl.reason)
			continue
		}
		r := &readmeRun{c: c, text: move(c.text), taskID: lastID}
		r.text = readmeBinary.ReplaceAllString(r.text, "${1}a2abus ")
		if readmePlaceholder.MatchString(r.text) {
			if lastID == "" {
				t.Errorf("%s wants a task id, but no example before it printed one:\n%s", c.where(), c.text)
				continue
			}
			r.text = readmePlaceholder.ReplaceAllStringFunc(r.text, func(m string) string {
				if strings.HasPrefix(m, "$") {
					return m
				}
				return lastID
			})
		}
		if prog, _ := program(c.segs[0]); prog == "curl" {
			ranCurl++
		} else {
			ranBinary++
		}
		ran++
		if c.background {
			t.Logf("RUN & %s: %s", c.where(), oneLine(r.text))
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			r.p = &proc{done: make(chan error, 1)}
			r.p.cmd = shellCommand(ctx, work, env, r.text)
			r.p.cmd.Stdout, r.p.cmd.Stderr = r.p, r.p
			if err := r.p.cmd.Start(); err != nil {
				t.Fatal(err)
			}
			go func() { r.p.done <- r.p.cmd.Wait() }()
			bg = append(bg, r)
			// It runs on once it has said it is there (a subscription
			// printed the task, a receiver that it listens).
			waitLine(r.p, 20*time.Second)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		r.p = &proc{done: make(chan error, 1)}
		r.p.cmd = shellCommand(ctx, work, env, r.text)
		r.p.cmd.Stdout, r.p.cmd.Stderr = r.p, r.p
		start := time.Now()
		err := r.p.cmd.Run()
		cancel()
		t.Logf("RUN   %s in %v: %s", c.where(), time.Since(start).Round(time.Millisecond), oneLine(r.text))
		code := -1
		if r.p.cmd.ProcessState != nil {
			code = r.p.cmd.ProcessState.ExitCode()
		}
		check(r, code, notExit(err))
		if m := readmeTaskID.FindStringSubmatch(r.p.output()); m != nil {
			lastID = m[1]
		}
	}
	endBlock()

	for i, e := range readmeExpect {
		if !matched[i] {
			t.Errorf("the README's section %q has no example run that contains %q: update readmeExpect", e.section, e.cmd)
		}
	}
	if ranCurl == 0 || ranBinary == 0 {
		t.Errorf("ran %d curl and %d a2abus examples: the README's examples were not found", ranCurl, ranBinary)
	}
	t.Logf("ran %d examples against %s", ran, base)
}

// notExit is err unless it only reports a non-zero exit, which the exit
// code says.
func notExit(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return nil
	}
	return err
}

// waitLine waits until p has printed a line or exited, or within passed.
func waitLine(p *proc, within time.Duration) {
	deadline := time.After(within)
	for !strings.Contains(p.output(), "\n") {
		select {
		case err := <-p.done:
			p.done <- err
			return
		case <-deadline:
			return
		case <-time.After(20 * time.Millisecond): // polling an external process's output
		}
	}
}

func containsAll(s string, subs []string) bool {
	for _, w := range subs {
		if !strings.Contains(s, w) {
			return false
		}
	}
	return true
}

// oneLine is a command on one line, for the log.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
