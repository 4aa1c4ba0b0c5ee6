package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/a2abus/a2abus/schemas"
)

// runAgentsAdmin is "a2abus agents add|update|remove EDGE_URL NAME": the
// run-time registry of an edge (/a2a/admin/agents), as an admin principal.
func runAgentsAdmin(ctx context.Context, verb string, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("a2abus agents "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	token := fs.String("token", "", "bearer token of an admin principal [$"+envToken+"]")
	apiKey := fs.String("api-key", "", "API key of an admin principal, sent as X-API-Key [$"+envAPIKey+"]")
	remote := fs.String("remote", "", "the external A2A agent's base URL (add; update to change it)")
	checkEvery := fs.String("check-every", "", "how often its card and health are re-checked, e.g. 30s")
	binding := fs.String("binding", "", "prefer its JSONRPC or HTTP+JSON interface")
	push := fs.String("push", "", "ask it for push notifications instead of streams: true or false")
	maintenance := fs.String("maintenance", "\x00", "put the agent in maintenance, saying why (\"\" ends it)")
	var tags, headers, headerEnv multiFlag
	fs.Var(&tags, "tag", "a tag added to its skills (repeatable)")
	fs.Var(&headers, "header", "a header sent to it, NAME=VALUE (repeatable; not for secrets)")
	fs.Var(&headerEnv, "header-env", "a header whose value the workers read from their environment, NAME=VARIABLE (repeatable)")
	var pos []string
	rest := args
	for len(rest) > 0 {
		if err := fs.Parse(rest); err != nil {
			return err
		}
		rest = fs.Args()
		if len(rest) > 0 {
			pos, rest = append(pos, rest[0]), rest[1:]
		}
	}
	if len(pos) != 2 {
		return fmt.Errorf("usage: a2abus agents %s EDGE_URL NAME [flags]", verb)
	}
	base, name := strings.TrimSuffix(pos[0], "/"), pos[1]
	if *token == "" {
		*token = getenv(envToken)
	}
	if *apiKey == "" {
		*apiKey = getenv(envAPIKey)
	}
	call := func(method string, body any) (*http.Response, []byte, error) {
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(cctx, method, base+"/a2a/admin/agents/"+name, rd)
		if err != nil {
			return nil, nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		if *token != "" {
			req.Header.Set("Authorization", "Bearer "+*token)
		}
		if *apiKey != "" {
			req.Header.Set("X-API-Key", *apiKey)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, nil, &cliError{msg: err.Error(), err: err}
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if resp.StatusCode/100 != 2 && !(method == http.MethodGet && resp.StatusCode == http.StatusNotFound) {
			return resp, raw, &cliError{msg: fmt.Sprintf("%s %s: %d %s", method, base+"/a2a/admin/agents/"+name, resp.StatusCode, strings.TrimSpace(string(raw)))}
		}
		return resp, raw, nil
	}
	if verb == "remove" {
		if _, _, err := call(http.MethodDelete, nil); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "removed %s\n", name)
		return nil
	}
	var e schemas.RegistryEntry
	if verb == "update" {
		resp, raw, err := call(http.MethodGet, nil)
		if err != nil {
			return err
		}
		if resp.StatusCode == http.StatusNotFound {
			return &cliError{msg: "no registry entry for " + name + "; use agents add"}
		}
		if err := json.Unmarshal(raw, &e); err != nil {
			return &cliError{msg: "the edge's answer: " + err.Error()}
		}
	}
	if *remote != "" || verb == "add" && *maintenance == "\x00" {
		if e.Remote == nil {
			e.Remote = &schemas.RemoteAgentSpec{}
		}
		if *remote != "" {
			e.Remote.URL = *remote
		}
	}
	if r := e.Remote; r != nil {
		if *checkEvery != "" {
			r.CheckEvery = *checkEvery
		}
		if *binding != "" {
			r.Binding = *binding
		}
		switch *push {
		case "":
		case "true", "false":
			r.Push = *push == "true"
		default:
			return errors.New("--push is true or false")
		}
		if len(tags) > 0 {
			r.Tags = tags
		}
		for _, list := range []struct {
			in  multiFlag
			out *map[string]string
		}{{headers, &r.Headers}, {headerEnv, &r.HeadersFromEnv}} {
			for _, h := range list.in {
				k, v, ok := strings.Cut(h, "=")
				if !ok {
					return fmt.Errorf("%q is not NAME=VALUE", h)
				}
				if *list.out == nil {
					*list.out = map[string]string{}
				}
				(*list.out)[k] = v
			}
		}
	}
	if *maintenance != "\x00" {
		e.Maintenance = *maintenance
	}
	if e.Remote == nil && e.Maintenance == "" {
		if _, _, err := call(http.MethodDelete, nil); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s: nothing left to set; entry removed\n", name)
		return nil
	}
	_, raw, err := call(http.MethodPut, e)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s\n", strings.TrimSpace(string(raw)))
	return nil
}
