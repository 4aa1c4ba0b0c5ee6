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

	"github.com/a2abus/a2abus/discovery"
	"github.com/a2abus/a2abus/schemas"
)

// runAgentsAdmin is "a2abus agents add|update|remove EDGE_URL NAME": the
// run-time registry of an edge (/a2a/admin/agents), as an admin principal.
func runAgentsAdmin(ctx context.Context, verb string, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("a2abus agents "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o clientOptions
	o.credentialFlags(fs, " of an admin principal", "")
	remote := fs.String("remote", "", "the external A2A agent's base URL (add; update to change it)")
	checkEvery := fs.String("check-every", "", "how often its card and health are re-checked, e.g. 30s")
	binding := fs.String("binding", "", "prefer its JSONRPC, HTTP+JSON or GRPC interface")
	push := fs.String("push", "", "ask it for push notifications instead of streams: true or false")
	maintenance := fs.String("maintenance", "\x00", "put the agent in maintenance, saying why (\"\" ends it)")
	var tags, headers, headerEnv multiFlag
	fs.Var(&tags, "tag", "a tag added to its skills (repeatable)")
	fs.Var(&headers, "header", "a header sent to it, NAME=VALUE (repeatable; not for secrets)")
	fs.Var(&headerEnv, "header-env", "a header whose value the workers read from their environment, NAME=VARIABLE (repeatable)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return fmt.Errorf("usage: a2abus agents %s EDGE_URL NAME [flags]", verb)
	}
	base, name := strings.TrimSuffix(pos[0], "/"), pos[1]
	o.credentialsFromEnv(getenv)
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
		req.Header = o.credentialHeader()
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			err = discovery.RedactError(err, base)
			return nil, nil, &cliError{msg: err.Error(), err: err}
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if resp.StatusCode/100 != 2 && !(method == http.MethodGet && resp.StatusCode == http.StatusNotFound) {
			return resp, raw, &cliError{msg: fmt.Sprintf("%s %s: %d %s", method, discovery.RedactURL(base+"/a2a/admin/agents/"+name), resp.StatusCode, strings.TrimSpace(string(raw)))}
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
