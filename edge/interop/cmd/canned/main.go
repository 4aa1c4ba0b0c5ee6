// Command canned is the floor under a blocking send's latency that
// compare.sh reports beside a2abus's one-client p50: a bare net/http
// server that does what every A2A server does before and after its own
// work — reads the JSON-RPC request, decodes it, and writes an answer of
// the shape and size of a2abus's echo answer (a completed task with its
// status message, one artifact and a history of two messages) — and
// nothing else: no store, no agent. `a2abus load` drives it as it drives
// the others (it reads the card first, then sends SendMessage).
//
//	go run ./cmd/canned --listen 127.0.0.1:9740
//	a2abus load --url http://127.0.0.1:9740 --clients 1
//
// It lives in the interop module beside a2agoecho, the other baseline, so
// the product module carries no benchmark servers.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// answer is the result a2abus's echo agent gives "hello": the same
// members and lengths (ids are UUIDs), so the floor writes what a2abus
// writes.
const answer = `{"task":{"id":"734412eb-7893-4371-8596-7927eee38419","contextId":"6e7424cb-f621-419a-ac42-38e8e337987a","status":{"state":"TASK_STATE_COMPLETED","message":{"messageId":"2eb0919f-dcd8-4f3a-a163-ba51b81e0875","contextId":"6e7424cb-f621-419a-ac42-38e8e337987a","taskId":"734412eb-7893-4371-8596-7927eee38419","role":"ROLE_AGENT","parts":[{"text":"echoed 5 characters in 1 chunk(s)"}]},"timestamp":"2026-11-28T05:56:14.358Z"},"artifacts":[{"artifactId":"echo-734412eb-7893-4371-8596-7927eee38419","name":"echo","parts":[{"text":"hello"}]}],"history":[{"messageId":"m1","contextId":"6e7424cb-f621-419a-ac42-38e8e337987a","taskId":"734412eb-7893-4371-8596-7927eee38419","role":"ROLE_USER","parts":[{"text":"hello"}]},{"messageId":"2eb0919f-dcd8-4f3a-a163-ba51b81e0875","contextId":"6e7424cb-f621-419a-ac42-38e8e337987a","taskId":"734412eb-7893-4371-8596-7927eee38419","role":"ROLE_AGENT","parts":[{"text":"echoed 5 characters in 1 chunk(s)"}]}]}}`

// request is what the floor reads of a call: as much as any server must
// to answer it (the method, the id and the message it carries).
type request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  struct {
		Message struct {
			MessageID string            `json:"messageId"`
			Role      string            `json:"role"`
			Parts     []json.RawMessage `json:"parts"`
		} `json:"message"`
	} `json:"params"`
}

func main() {
	listen := flag.String("listen", "127.0.0.1:9740", "loopback HOST:PORT to serve on")
	flag.Parse()
	if host, _, err := net.SplitHostPort(*listen); err != nil || !net.ParseIP(host).IsLoopback() {
		log.Fatalf("--listen %q: a loopback HOST:PORT", *listen)
	}
	base := "http://" + *listen
	card := fmt.Sprintf(`{"name":"canned","description":"The floor under a blocking send: a canned answer.","supportedInterfaces":[{"url":%q,"protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"version":"1.0.0","capabilities":{"streaming":false},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[{"id":"canned","name":"Canned","description":"Answers every message with the same completed task.","tags":["benchmark"]}]}`, base+"/")
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/agent-card.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, card)
	})
	mux.HandleFunc("POST /", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
		var req request
		if err == nil {
			err = json.Unmarshal(body, &req)
		}
		if err != nil || req.Method != "SendMessage" || len(req.Params.Message.Parts) == 0 {
			http.Error(w, "a SendMessage JSON-RPC request", http.StatusBadRequest)
			return
		}
		var out bytes.Buffer
		out.Grow(len(answer) + 64)
		out.WriteString(`{"jsonrpc":"2.0","id":`)
		out.Write(req.ID)
		out.WriteString(`,"result":`)
		out.WriteString(answer)
		out.WriteString("}")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out.Bytes())
	})
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
		<-sig
		_ = srv.Close()
	}()
	log.Printf("canned answer on %s", strings.TrimSuffix(base, "/"))
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		log.Fatal(err)
	}
}
